"""The Chinese demo story: three weeks of a small team in Hangzhou building a WeChat mini
program with a coding/planning assistant (``lossless demo --lang zh``).

A five-person team builds online ordering with store pickup and delivery for a chain of community fresh-food stores: the stack and the cloud budget, the cache, stock
reservation, WeChat Pay and its callbacks, a daily store report fed by GBK-encoded CSV files, a
load test, the mini program's review, a two-store pilot, the full launch and its incident.
Decisions with reasons, numbers, tracebacks, code with English identifiers in Chinese prose, tool
calls with JSON results, facts that change later, stated preferences and small talk.

The text is original, hand-written for this project (``scenes/zh/*.txt``, the format of
:mod:`lossless.demo.text`); :mod:`lossless.demo.script` plays it. A ``random.Random(seed)``
draws the names, numbers and dates, so every seed gives a different but coherent conversation.
"""

from __future__ import annotations

import json
import random
from datetime import date, timedelta
from functools import cache, lru_cache

from lossless.demo.script import Cast, DemoQuestion, Details, Story, ids, parse
from lossless.demo.text import scene

__all__ = ["details", "questions", "story"]

# --------------------------------------------------------------------------- seed material

_PRODUCTS = (("鲜邻到家", "xianlin"), ("早鲜达", "zaoxianda"), ("邻里鲜", "linlixian"),
             ("一刻鲜", "yikexian"), ("小满鲜食", "xiaoman"), ("禾下优选", "hexia"))
_COMPANIES = (("杭州青禾网络科技", "qinghe"), ("杭州拾光数智科技", "shiguang"),
              ("杭州云帆信息技术", "yunfan"), ("杭州木棉科技", "mumian"))
_CUSTOMERS = ("禾盛生鲜", "邻家菜篮子", "半亩园生鲜", "町上鲜生", "一米菜园")
_WAREHOUSES = (("余杭区", "仓前"), ("萧山区", "宁围"), ("拱墅区", "康桥"), ("滨江区", "浦沿"))
_STORES = ("文一西路店", "古墩路店", "江南大道店", "湖墅南路店", "良渚店", "闻堰店", "丰潭路店", "五常店")
_CONTACTS = ("赵敏", "钱建国", "孙丽华", "冯涛", "蒋晓燕")
_CONTACT_ROLES = ("运营总监", "数字化负责人", "门店运营经理", "会员运营主管")
_BOSSES = ("周总", "马总", "郑总", "何总")
# (full name, what colleagues call them)
_PMS = (("何静", "何静"), ("孙悦", "孙悦"), ("郑一鸣", "一鸣"), ("许诺", "许诺"))
_OPS = (("黄磊", "黄磊"), ("吴昊", "吴昊"), ("邓子轩", "子轩"), ("罗斌", "罗斌"))
_SQLALCHEMY = ("2.0.25", "2.0.29", "2.0.31", "2.0.36")
_FASTAPI = ("0.110", "0.111", "0.112", "0.115")
_FIRST_MONDAY = date(2025, 1, 6)
# mainland public holidays of 2025: no team works through these, so no story spans them
_HOLIDAYS = (
    (date(2025, 1, 1), date(2025, 1, 1)), (date(2025, 1, 28), date(2025, 2, 4)),
    (date(2025, 4, 4), date(2025, 4, 6)), (date(2025, 5, 1), date(2025, 5, 5)),
    (date(2025, 5, 31), date(2025, 6, 2)), (date(2025, 10, 1), date(2025, 10, 8)),
)
_WEEKDAYS = "一二三四五六日"
# the bill's products and their shares of the spend
_BILL = (("云服务器 ECS", 0.31), ("云数据库 RDS MySQL 版", 0.34), ("云数据库 Tair（兼容 Redis）", 0.11),
         ("负载均衡 SLB", 0.07), ("对象存储 OSS", 0.04), ("CDN", 0.05), ("日志服务 SLS", 0.08))


def _fmt_day(d: date) -> str:
    return f"{d.month}月{d.day}日（周{_WEEKDAYS[d.weekday()]}）"


def _mondays() -> list[date]:
    """The Mondays of 2025 whose three weeks miss every public holiday."""
    out = []
    for k in range(44):
        start = _FIRST_MONDAY + timedelta(days=7 * k)
        end = start + timedelta(days=18)
        if all(end < first or last < start for first, last in _HOLIDAYS):
            out.append(start)
    return out


@lru_cache(maxsize=16)
def details(seed: int) -> Details:
    """Every seed-drawn fact of the Chinese story, as the strings its text substitutes."""
    rng = random.Random(seed)
    v: dict[str, str] = {}
    product, slug = rng.choice(_PRODUCTS)
    company, company_slug = rng.choice(_COMPANIES)
    district, town = rng.choice(_WAREHOUSES)
    pm, pm_first = rng.choice(_PMS)
    ops, ops_first = rng.choice(_OPS)
    pilot1, pilot2 = rng.sample(_STORES, 2)
    v.update(
        product=product, slug=slug, company=company, company_slug=company_slug,
        customer=rng.choice(_CUSTOMERS), wh_district=district, wh_town=town, contact=rng.choice(_CONTACTS),
        contact_role=rng.choice(_CONTACT_ROLES), boss_short=rng.choice(_BOSSES), pm=pm, pm_first=pm_first,
        ops=ops, ops_first=ops_first, pilot1=pilot1, pilot2=pilot2, sqla=rng.choice(_SQLALCHEMY),
        fastapi=rng.choice(_FASTAPI),
    )

    # the early facts that questions() asks about
    stores = rng.randint(28, 46)
    daily_orders = round(stores * rng.randint(70, 95), -2)
    p95 = rng.choice((200, 250, 300, 400))
    v.update(
        stores=str(stores), daily_orders=f"{daily_orders:,}", p95=str(p95),
        ttl=str(rng.choice((5, 10, 15, 30))), budget=rng.choice(("3000", "3500", "4000", "5000", "6000")),
        limit=str(rng.choice((1, 2, 3))), cancel=str(rng.choice((10, 15, 20, 30))), poll=str(rng.choice((3, 5, 10))),
    )

    # later facts, some of which replace earlier ones
    users = rng.choice((200, 300, 400))
    v.update(
        port_new=str(rng.choice((3307, 3308, 13306, 23306))), users=str(users),
        p95_before=f"{round(p95 * rng.uniform(3.5, 6.0), -1):,.0f}",
        p99_before=f"{round(p95 * rng.uniform(7.0, 9.5), -1):,.0f}",
        p95_after=str(round(p95 * rng.uniform(0.3, 0.6))), scale_factor=str(round(stores / 2)),
        stores_new=str(stores - 2), audit_id=str(rng.randint(40, 90)),
        incident_success=f"{rng.uniform(88.0, 95.0):.1f}", incident_errors=str(rng.randint(1200, 2600)),
        incident_minutes=str(rng.randint(12, 18)),
        report_online=str(rng.randint(120, 300)), report_pos=f"{stores * rng.randint(130, 170):,}",
        report_top_rows=str(stores * 10), report_online2=str(rng.randint(110, 190)),
        report_pos2=f"{stores * rng.randint(130, 170):,}",
    )
    cancel_rate = rng.uniform(0.04, 0.08)
    v.update(cancel_rate=f"{cancel_rate:.4f}", cancel_rate_pct=f"{100 * cancel_rate:.1f}")
    for i in range(1, 4):
        v[f"sha{i}"] = f"{rng.getrandbits(28):07x}"
    for i in range(1, 4):
        v[f"cpu_{i}"] = str(rng.randint(28, 41))
    for name in ("backup_a", "backup_b", "backup_c"):
        v[name] = str(rng.randint(1_800_000_000, 1_899_999_999))
    ticket0 = rng.randint(20, 60)
    for i in range(1, 10):
        v[f"t{i}"] = f"{slug[:2].upper()}-{ticket0 + i}"

    start = rng.choice(_mondays())
    day = [start + timedelta(days=n) for n in range(26)]
    v.update(
        launch_d1=_fmt_day(day[14]), launch_d2=_fmt_day(day[16]), gray_day=_fmt_day(day[11]),
        due_pay=day[9].isoformat(), due_report=day[8].isoformat(), due_mp=day[10].isoformat(),
        due_mp2=day[15].isoformat(), month=f"{day[15]:%Y-%m}",
    )
    for n in (3, 7, 11, 12, 13, 14, 16, 17, 18, 25):
        v[f"iso_d{n}"] = day[n].isoformat()
    _generated_blocks(rng, v, stores, daily_orders, day)
    return Details(values=v, start=start, utc_offset=8, flow_seed=rng.getrandbits(64))


# --------------------------------------------------------------------------- generated blocks

def _generated_blocks(rng: random.Random, v: dict[str, str], stores: int, daily_orders: int, day: list[date]) -> None:
    """Tool outputs that are long or numeric: load tests, slow queries, metrics, a bill."""
    _load_test_blocks(rng, v, stores)
    v["full_suite"] = _full_suite(rng)
    _launch_blocks(rng, v, stores, daily_orders, day)


def _load_test_blocks(rng: random.Random, v: dict[str, str], stores: int) -> None:
    """The two load tests and the slow-query log between them."""
    users, p95_before = int(v["users"]), int(v["p95_before"].replace(",", ""))
    ramp = users / 10
    lines = [
        f"locust 2.24.1  host=https://staging-api.{v['slug']}.cn  users={users}  spawn-rate=10/s  run-time=10m",
        "report.py out/run1: one row per 6 s from out/run1_stats_history.csv",
        "  time   users    rps  fail | products p50/p95 (ms) | orders list p50/p95 (ms) | POST /api/orders p50/p95 (ms)",
    ]
    sent = fails = 0
    for t in range(6, 601, 6):
        active = min(users, round(10 * t))
        rps = active / 2 * rng.uniform(0.96, 1.04)
        fail = rng.choice((0, 0, 1, 2, 4)) if ramp / 3 <= t <= ramp + 20 else 0
        load = 0.5 + 0.5 * min(1.0, t / ramp)
        sent += round(rps * 6)
        fails += fail
        lines.append(
            f"  {t // 60:02d}:{t % 60:02d}  {active:5d}  {rps:5.1f}  {fail:4d} |"
            f"  {rng.randint(8, 14):4d} / {rng.randint(22, 41):4d}        |"
            f"  {rng.randint(11, 19):4d} / {rng.randint(30, 58):4d}           |"
            f"  {round(p95_before * 0.5 * load * rng.uniform(0.9, 1.1)):5d} / {round(p95_before * load * rng.uniform(0.9, 1.1)):5d}"
        )
    lines += [
        "",
        "summary (steady state, after ramp-up)",
        "  name                          reqs    p50    p95    p99     max   fails",
        f"  GET  /api/stores/[id]/products {round(sent * 0.7):6d}   11ms   33ms   71ms   240ms   0",
        f"  GET  /api/orders [list]       {round(sent * 0.2):6d}   15ms   46ms   88ms   310ms   0",
        f"  POST /api/orders              {round(sent * 0.1):6d} {round(p95_before * 0.5):5d}ms "
        f"{v['p95_before']:>5}ms {v['p99_before']:>5}ms {round(int(v['p99_before'].replace(',', '')) * 1.3):>6,}ms   0",
        f"  502 Bad Gateway during ramp-up: {fails}",
        f"  total {sent} requests, {100 * fails / sent:.2f}% failed",
    ]
    v["loadtest_log"] = "\n".join(lines)
    p95_after = int(v["p95_after"])
    v["loadtest_after"] = "\n".join([
        f"locust 2.24.1  host=https://staging-api.{v['slug']}.cn  users={users}  spawn-rate=10/s  run-time=6m",
        "summary (steady state, after ramp-up)",
        "  name                          reqs    p50    p95    p99     max   fails",
        f"  GET  /api/stores/[id]/products {users * 126:6d}   10ms   31ms   66ms   228ms   0",
        f"  GET  /api/orders [list]       {users * 36:6d}   14ms   44ms   83ms   297ms   0",
        f"  POST /api/orders              {users * 18:6d} {round(p95_after * 0.45):5d}ms {p95_after:5d}ms"
        f" {round(p95_after * 1.8):5d}ms {round(p95_after * 3.4):6d}ms   0",
        f"  502 Bad Gateway during ramp-up: {rng.randint(2, 6)}",
    ])
    examined = round(500_000 * rng.uniform(0.52, 0.64))
    v["slow_log"] = "\n".join([
        f"slow queries {v['iso_d7']} 14:00-15:00 (long_query_time=0.2s), top 3 by total time",
        f"#1  count={rng.randint(1500, 2100)}  avg={round(p95_before * 0.62)}ms  max={round(p95_before * 2.1)}ms"
        f"  rows_examined(avg)={examined}  rows_sent=1",
        "    SELECT COALESCE(SUM(i.qty), 0) FROM orders o JOIN order_item i ON i.order_id = o.id",
        "    WHERE o.openid = ? AND o.created_at >= ? AND o.status NOT IN (?, ?) AND i.product_id IN (?, ?, ?, ?, ?)",
        f"#2  count={rng.randint(40, 90)}  avg={rng.randint(240, 420)}ms  max={rng.randint(700, 1300)}ms"
        f"  rows_examined(avg)={rng.randint(90_000, 160_000)}  rows_sent={rng.randint(20, 50)}",
        "    SELECT * FROM orders WHERE store_id = ? AND status = ? ORDER BY created_at DESC LIMIT ?",
        f"#3  count={rng.randint(5, 15)}  avg={rng.randint(210, 260)}ms  max={rng.randint(300, 480)}ms"
        f"  rows_examined(avg)={stores * 800}  rows_sent={stores * 800}",
        "    SELECT store_id, product_id, stock FROM store_stock",
    ])


def _launch_blocks(rng: random.Random, v: dict[str, str], stores: int, daily_orders: int, day: list[date]) -> None:
    """The pilot's and the launch's metrics, and the mid-month bill."""
    pilot = [round(daily_orders / stores * rng.uniform(0.35, 0.5)) for _ in range(2)]
    pilot.sort(reverse=True)
    v.update(pilot_orders=str(sum(pilot)), pilot_pay_pct=f"{rng.uniform(90.0, 94.5):.1f}")
    v["pilot_morning"] = json.dumps({"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"store": name}, "value": [1, str(n)]} for name, n in zip((v["pilot1"], v["pilot2"]), pilot, strict=True)]}},
        ensure_ascii=False)
    p95_ms = rng.randint(60, 110)
    v.update(pilot_p95_ms=str(p95_ms), pilot_p95_s=f"{p95_ms / 1000:.3f}")
    v["pilot_week"] = json.dumps([
        {"day": day[n].isoformat(), "orders": round(sum(pilot) * 2 * rng.uniform(1.0, 1.4)),
         "order_success_pct": round(rng.uniform(99.5, 99.95), 2), "pay_success_pct": round(rng.uniform(90.0, 95.0), 1),
         "timeout_cancel_pct": round(rng.uniform(4.0, 8.0), 1), "pickup_verified_pct": round(rng.uniform(96.0, 99.5), 1),
         "negative_stock_rows": 0, "p95_ms": {"POST /api/orders": rng.randint(60, 120), "GET /api/stores/[id]/products": rng.randint(20, 40)}}
        for n in (11, 12, 13)], ensure_ascii=False, indent=1)

    codes = sorted(rng.sample(range(1001, 1100), stores))
    morning = {code: round(daily_orders / stores * rng.uniform(0.25, 0.75)) for code in codes}
    v["launch_morning"] = json.dumps({"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"store_id": str(code)}, "value": [1, str(n)]} for code, n in morning.items()]}})
    v["launch_morning_total"] = f"{sum(morning.values()):,}"
    launch_orders = round(daily_orders * rng.uniform(1.1, 1.35))
    pickup, cancel = rng.uniform(66.0, 74.0), rng.uniform(4.0, 7.5)
    success, aov = rng.uniform(98.6, 99.3), rng.uniform(38.0, 56.0)
    weights = (0, 0, 0, 0, 0, 1, 4, 14, 12, 7, 5, 4, 4, 3, 3, 4, 7, 12, 11, 6, 3, 2, 1, 0)
    by_hour = [round(launch_orders * w / sum(weights) * rng.uniform(0.9, 1.1)) for w in weights]
    v.update(launch_orders=f"{launch_orders:,}", launch_success=f"{success:.1f}", launch_pickup_pct=f"{pickup:.1f}",
             launch_cancel_pct=f"{cancel:.1f}", launch_aov=f"{aov:.1f}")
    v["launch_metrics"] = json.dumps({
        "date": day[16].isoformat(), "stores": stores, "orders": launch_orders, "order_success_pct": round(success, 1),
        "pay_success_pct": round(100 - cancel - rng.uniform(0.5, 1.5), 1), "pickup_pct": round(pickup, 1),
        "timeout_cancel_pct": round(cancel, 1), "avg_order_value_yuan": round(aov, 1), "refunds": rng.randint(6, 20),
        "orders_by_hour": {f"{h:02d}": n for h, n in enumerate(by_hour)},
    }, ensure_ascii=False, indent=1)

    daily_cost = rng.uniform(52.0, 66.0)
    spent_days = day[15].day - 1 or 1
    total = daily_cost * spent_days
    v.update(bill_mid=_bill(rng, total), bill_total=f"{total:,.2f}", bill_month_est=f"{daily_cost * 30.5 + 30:,.0f}")
    v["daily_cost"] = f"{daily_cost:.4f}"


def _bill(rng: random.Random, total: float) -> str:
    rows = [f"{'产品':<24}金额（元）"]
    rows += [f"{name:<24}{total * share * rng.uniform(0.93, 1.07):.2f}" for name, share in _BILL]
    rows.append(f"{'合计':<24}{total:.2f}")
    return "\n".join(rows)


def _full_suite(rng: random.Random) -> str:
    files = ("auth/test_login.py", "auth/test_token.py", "catalog/test_cache.py", "catalog/test_products.py",
             "miniprogram_api/test_order_status.py", "orders/test_cancel_timeout.py", "orders/test_create.py",
             "orders/test_limits.py", "orders/test_order_no.py", "orders/test_stock.py", "payment/test_amount.py",
             "payment/test_live_sandbox.py", "payment/test_notify.py", "payment/test_query_before_cancel.py",
             "reports/test_daily.py", "reports/test_pos_encoding.py", "reports/test_rejected_rows.py",
             "stores/test_switch.py", "test_routes_prod.py", "test_settings.py")
    counts = [rng.randint(3, 14) for _ in files]
    total, done, out = sum(counts), 0, []
    for name, n in zip(files, counts, strict=True):
        done += n
        dots = "ss" + "." * (n - 2) if name == "payment/test_live_sandbox.py" else "." * n
        out.append(f"{'tests/' + name + ' ' + dots:<72} [{100 * done // total:3d}%]")
    out += ["", "=========================== short test summary info ============================",
            "SKIPPED [2] tests/payment/test_live_sandbox.py: needs a real WeChat Pay merchant (pre-release only)",
            f"{total - 2} passed, 2 skipped in {rng.uniform(18, 32):.2f}s"]
    return "\n".join(out)


# --------------------------------------------------------------------------- the story

_SPEAKERS = {"lin": ("user", "lin_yuan"), "su": ("user", "su_qing"), "chen": ("user", "chen_guodong")}


def _routine_values(rng: random.Random, det: Details, day: int) -> dict[str, str]:
    """Details that differ per morning check-in: run ids, today's date, the bill, counts."""
    today = det.start + timedelta(days=day)
    month_start = today.replace(day=1)
    if today == month_start:
        month_start = (today - timedelta(days=1)).replace(day=1)
    total = (today - month_start).days * float(det.values["daily_cost"]) * rng.uniform(0.97, 1.03)
    out = {f"run_id{suffix}": str(rng.randint(9_100_000_000, 9_400_000_000)) for suffix in ("", "2", "3", "4")}
    used = rng.randint(33, 37)
    after = used - 21
    created = round(int(det.values["daily_orders"].replace(",", "")) * rng.uniform(1.1, 1.4))
    cancelled = round(created * rng.uniform(0.04, 0.07))
    stores = int(det.values["stores"])
    out.update(
        today_iso=today.isoformat(), yesterday_iso=(today - timedelta(days=1)).isoformat(),
        month=f"{month_start:%Y-%m}", cost_total=f"{total:.2f}",
        cost_table="\n".join(f"{name:<24}{total * share * rng.uniform(0.93, 1.07):.2f}" for name, share in _BILL),
        five_xx=str(rng.randint(2, 9)), report_secs=f"{rng.randint(6, 38):02d}",
        report_chars=str(rng.randint(1800, 2600)),
        disk_used=str(used), disk_avail=str(40 - used - 2), disk_pct=str(round(100 * used / 40)),
        disk_used_after=str(after), disk_avail_after=str(40 - after - 2), disk_pct_after=str(round(100 * after / 40)),
        orders_created=str(created), orders_paid=str(created - cancelled - rng.randint(5, 20)),
        orders_cancelled=str(cancelled), timeout_a=str(rng.randint(1, 4)), timeout_b=str(rng.randint(1, 3)),
        order_kept=f"{today:%y%m%d}{rng.randint(1001, 1000 + stores)}{ids(rng, '', 10, '0123456789')}",
    )
    return out


@cache
def story() -> Story:
    """The Chinese story's cast, scenes and check-ins."""
    weeks = scene("zh/week1") + scene("zh/week2") + scene("zh/week3") + scene("zh/extra") + scene("zh/extra2")
    cast = Cast(speakers=_SPEAKERS, lead="lin", acks=tuple(scene("zh/acks").splitlines()))
    return Story(cast=cast, system_prompt=scene("zh/system_prompt"),
                 scenes=tuple(sorted(parse(weeks), key=lambda sc: (sc.day, sc.minute))),
                 early_routines=parse(scene("zh/routines_early")), late_routines=parse(scene("zh/routines_late")),
                 early_days=(2, 3, 4), late_days=(7, 8, 9, 10, 11, 15, 17, 18), routine_values=_routine_values)


def questions(seed: int) -> list[DemoQuestion]:
    """Questions answered once, early in the Chinese conversation, with verbatim evidence and
    the two-character word (most Chinese words have two) the demo searches for."""
    v = details(seed).values
    q: list[tuple[str, str, str, str]] = [
        ("我们当时定的商品详情缓存过期时间是多少？", f"{v['ttl']} 分钟（另加 0～60 秒随机抖动）",
         f"商品详情缓存过期时间定为 {v['ttl']} 分钟", "缓存"),
        ("老板批的每月云资源预算是多少？", f"每月 {v['budget']} 元，含测试环境", f"每月云资源预算 {v['budget']} 元", "预算"),
        ("下单接口的 p95 延迟目标定的是多少？", f"{v['p95']} 毫秒以内", f"下单接口 p95 控制在 {v['p95']} 毫秒以内", "下单"),
        ("客户一共有多少家门店？", f"{v['stores']} 家", f"现在一共 {v['stores']} 家门店", "门店"),
        ("客户那边的对接人是谁？什么职位？", f"{v['contact']}，{v['contact_role']}",
         f"对接人是{v['contact']}，他们的{v['contact_role']}", "对接"),
        ("特价商品每人每天限购几份？", f"{v['limit']} 份", f"特价商品每人每天限购 {v['limit']} 份", "限购"),
        ("没付款的订单多久会自动取消？", f"{v['cancel']} 分钟", f"未支付订单 {v['cancel']} 分钟后自动取消", "取消"),
        ("取货码页面在前台时多久轮询一次订单状态？", f"每 {v['poll']} 秒", f"前台每 {v['poll']} 秒轮询一次", "轮询"),
        ("谁负责阿里云账号和基础设施变更？", v["ops"], f"阿里云账号和 Terraform 都归{v['ops']}管", "账号"),
        ("SQLAlchemy 锁的是哪个版本？", f"sqlalchemy=={v['sqla']}", f'"sqlalchemy=={v["sqla"]}"', "sqlalchemy"),
        ("林远希望回答默认怎么组织？", "先给结论，再列要点", "我更喜欢你先给结论，再列要点", "结论"),
        ("林远希望代码注释用什么语言写？", "英文，commit message 也用英文", "代码注释我更喜欢用英文写", "注释"),
    ]
    return [DemoQuestion(question, answer, evidence, keyword) for question, answer, evidence, keyword in q]
