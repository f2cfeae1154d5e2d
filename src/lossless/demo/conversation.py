"""A long, realistic, deterministic conversation for ``lossless demo`` and for tests.

About three weeks of a small team building and launching a delivery-routing service with a
coding/planning assistant: decisions with reasons, numbers, people, tracebacks, code, tool
calls with JSON results, facts that change later, stated preferences, some Chinese and a
little Japanese, and plenty of small talk. The text is original, hand-written for this project
(:mod:`lossless.demo.text`, scenes as package data); a ``random.Random(seed)`` draws the names, numbers, dates,
phrasings, optional scenes and timings, so every seed gives a different but equally coherent
conversation and the same seed always gives the same one.

:func:`demo_questions` returns questions whose answers are stated once, early on (so a
compacting engine has summarized them away by the end), each with a verbatim evidence string.

Both take ``lang``: ``"en"`` (this story) or ``"zh"`` (:mod:`lossless.demo.zh`: a team in
Hangzhou building a WeChat mini program, written in Chinese). The scenes are played by
:mod:`lossless.demo.script`.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, date, datetime, timedelta
from functools import cache, lru_cache
from typing import Any

from lossless.demo import zh
from lossless.demo.script import Cast, DemoQuestion, Details, Story, build, ids, parse
from lossless.demo.text import (
    ACKS,
    EXTRA,
    EXTRA2,
    ROUTINES_EARLY,
    ROUTINES_LATE,
    SYSTEM_PROMPT,
    WEEK1,
    WEEK2,
    WEEK3,
)

__all__ = ["LANGUAGES", "DemoQuestion", "demo_conversation", "demo_questions", "demo_utc_offset"]

LANGUAGES = ("en", "zh")
"""The languages of the demo stories: English, and Chinese (simplified, mainland)."""


# --------------------------------------------------------------------------- seed material

_PRODUCTS = ("Relay", "Waypoint", "Switchback", "Lodestar", "Milepost", "Wayfinder")
_COMPANIES = (
    ("Kestrel Labs", "kestrel-labs"),
    ("Tidewater Systems", "tidewater"),
    ("Brightline Software", "brightline"),
    ("Copperleaf Technologies", "copperleaf"),
    ("Harborlight", "harborlight"),
)
_CUSTOMERS = (
    ("Greenleaf Grocery", "GL"),
    ("Marigold Pantry", "MP"),
    ("Bluebell Market", "BB"),
    ("Harvest Lane Food Co.", "HL"),
    ("Copper Kettle Grocery", "CK"),
    ("Fernway Fresh", "FF"),
)
# city, first depot, second depot, UTC offset (hours), Geofabrik region, latitude, longitude
_CITIES = (
    ("Portland", "Swan Island", "Gresham", -8, "north-america/us/oregon", 45.52, -122.68),
    ("Rotterdam", "Waalhaven", "Capelle aan den IJssel", 1, "europe/netherlands/zuid-holland", 51.92, 4.48),
    ("Leeds", "Stourton", "Wakefield", 0, "europe/united-kingdom/england/west-yorkshire", 53.80, -1.55),
    ("Austin", "Montopolis", "Round Rock", -6, "north-america/us/texas", 30.27, -97.74),
    ("Lyon", "Gerland", "Vénissieux", 1, "europe/france/rhone-alpes", 45.76, 4.84),
    ("Hamburg", "Billbrook", "Harburg", 1, "europe/germany/hamburg", 53.55, 9.99),
    ("Melbourne", "Port Melbourne", "Dandenong", 10, "australia-oceania/australia", -37.81, 144.96),
)
_CONTACTS = ("Dana Whitfield", "Ruth Okonkwo", "Pieter Janssen", "Carmen Ruiz", "Oliver Grant", "Ines Duarte")
_CONTACT_ROLES = ("head of dispatch", "dispatch manager", "operations lead", "fleet manager")
_COOS = ("Helen Brandt", "Samuel Achterberg", "Nadia Haddad", "George Whitcombe")
_PMS = (("Priya Raman", "priya-r"), ("Daniel Okafor", "dokafor"), ("Sofia Lindqvist", "sofial"), ("Marcus Bell", "mbell"))
_OPS = (("Tomás Ortega", "tomas-o"), ("Grace Mwangi", "gmwangi"), ("Jonas Weber", "jweber"), ("Ana Souza", "asouza"))
_GEOCODERS = ("Mapbox", "HERE", "Google")
_ORTOOLS = ("9.8.3296", "9.9.3963", "9.10.4067", "9.11.4210")
_FASTAPI = ("0.110", "0.111", "0.112", "0.115")
_FIRST_MONDAY = date(2025, 1, 6)



def _fmt_day(d: date) -> str:
    return f"{d:%A}, {d:%B} {d.day}"


@lru_cache(maxsize=16)
def _details(seed: int) -> Details:
    """Every seed-drawn fact of the story, as the strings the text substitutes."""
    rng = random.Random(seed)
    v: dict[str, str] = {}
    product = rng.choice(_PRODUCTS)
    company, company_slug = rng.choice(_COMPANIES)
    customer, op = rng.choice(_CUSTOMERS)
    city, depot1, depot2, offset, region, lat, lon = rng.choice(_CITIES)
    contact = rng.choice(_CONTACTS)
    pm, pm_handle = rng.choice(_PMS)
    ops, ops_handle = rng.choice(_OPS)
    coo = rng.choice(_COOS)
    v.update(
        product=product, slug=product.lower(), company=company, company_slug=company_slug,
        customer=customer, customer_slug=customer.split()[0].lower(), op=op, city=city,
        depot1=depot1, depot2=depot2, region_slug=region, contact=contact,
        contact_first=contact.split()[0], contact_role=rng.choice(_CONTACT_ROLES), coo=coo,
        coo_first=coo.split()[0], pm=pm, pm_first=pm.split()[0], pm_handle=pm_handle, ops=ops,
        ops_first=ops.split()[0], ops_handle=ops_handle, geocoder=rng.choice(_GEOCODERS),
        ortools=rng.choice(_ORTOOLS), fastapi=rng.choice(_FASTAPI),
    )
    for i, (dlat, dlon) in enumerate(((0.0, 0.0), (0.031, -0.042), (-0.048, 0.057))):
        c = "abc"[i]
        pt_lat, pt_lon = lat + dlat + rng.uniform(-0.01, 0.01), lon + dlon + rng.uniform(-0.01, 0.01)
        v[f"lonlat_{c}"] = f"{pt_lon:.5f},{pt_lat:.5f}"
        v[f"lat_{c}"], v[f"lon_{c}"] = f"{pt_lat:.5f}", f"{pt_lon:.5f}"

    # the early facts that demo_questions() asks about
    drivers = rng.randint(42, 58)
    stops = rng.randrange(1000, 1201, 10)
    p95 = rng.choice((250, 300, 350, 400, 450, 500))
    limit = rng.choice((60, 90, 120, 180))
    v.update(
        drivers=str(drivers), stops=f"{stops:,}", van_cap=str(rng.choice((24, 28, 30, 32, 36, 40))),
        budget=rng.choice(("$3,500", "$4,000", "$4,500", "$5,000", "$6,000")),
        ttl=str(rng.choice((30, 45, 60, 90))), p95_ms=str(p95),
        solver_limit=str(limit), poll_s=str(rng.choice((15, 20, 30, 45))),
    )

    # later facts, some of which replace earlier ones
    vehicles = drivers - rng.randint(1, 4)
    stops_both = stops + rng.randint(-30, 40)
    oom_stops = round(stops * rng.uniform(1.12, 1.2))
    nodes = oom_stops + 2
    copy_mb = nodes * nodes * 36 / 1e6
    callbacks_gb = vehicles * copy_mb / 1000
    mem_old = 2 if callbacks_gb > 2.3 else 1
    mem_new = next(g for g in (4, 6, 8, 12) if g > callbacks_gb * 1.15)
    synthetic_stops = -(-2 * stops * 13 // 10 // 100) * 100
    synthetic_peak = rng.uniform(180.0, 260.0)
    v.update(
        pg_port_new=str(rng.choice((6432, 6433, 6543, 16432))), rps=str(rng.choice((30, 40, 50, 60))),
        p95_before=f"{round(p95 * rng.uniform(3.5, 6.0), -1):,.0f}",
        p99_before=f"{round(p95 * rng.uniform(7.0, 9.5), -1):,.0f}",
        p95_after=str(round(p95 * rng.uniform(0.15, 0.3))), vehicles_both=str(vehicles),
        stops_both=f"{stops_both:,}", stops_b=str(stops_both - rng.randint(5, 25)),
        oom_stops=f"{oom_stops:,}", oom_nodes_round=f"{round(nodes, -2):,}", copy_mb=f"{copy_mb:.0f}",
        callbacks_gb=f"{callbacks_gb:.1f}", mem_old=f"{mem_old} GiB", mem_new=f"{mem_new} GiB",
        mem_peak=f"{callbacks_gb * rng.uniform(1.04, 1.1):.2f} GB",
        synthetic_stops=f"{synthetic_stops:,}", synthetic_vehicles=str(2 * vehicles + 10),
        synthetic_peak=f"{synthetic_peak:.1f}", synthetic_peak_round=str(round(synthetic_peak)),
        km_saved_pct=f"{rng.uniform(9.0, 17.0):.1f}", solve_wait=str(limit + rng.randint(9, 20)), stops_launch=f"{stops + rng.randint(-20, 60):,}",
        log_hhmm=f"0{rng.randint(7, 8)}:{rng.randint(10, 59)}",
    )
    v["nodes_b"] = str(int(v["stops_b"]) + 2)
    v["disj_b"] = str(int(v["stops_b"]) - 37)
    geo_fail = rng.randint(38, 70)
    v.update(geo_fail_n=str(geo_fail), geo_fail_pct=f"{100 * geo_fail / stops_both:.1f}")
    for i in range(1, 5):
        v[f"sha{i}"] = f"{rng.getrandbits(28):07x}"
    ticket0 = rng.randint(100, 180)
    for i in range(1, 9):
        v[f"t{i}"] = f"{product[:3].upper()}-{ticket0 + i}"
    for name in ("job_a", "job_b", "job_c", "job_d", "job_e"):
        v[name] = ids(rng, "job_", 8).lower()
    for name in ("order_x", "order_y", "order_z", "order_z2", "order_z3", "order_z4", "order_z5",
                 "order_z6", "order_z7", "order_u1", "order_u2", "order_m"):
        v[name] = str(rng.randint(550000, 599999))
    v["route_12"], v["route_19"] = ids(rng, "", 10), ids(rng, "", 10)

    offset_days = 7 * rng.randrange(0, 44)
    start = _FIRST_MONDAY + timedelta(days=offset_days)
    day = [start + timedelta(days=n) for n in range(21)]
    v.update(
        launch_d1=_fmt_day(day[14]), launch_d2=_fmt_day(day[17]), shadow_d1=_fmt_day(day[9]),
        shadow_d1_end=_fmt_day(day[11]), shadow_d2=_fmt_day(day[14]), shadow_d2_end=_fmt_day(day[16]),
        due_ingest=day[4].isoformat(), due_app=day[8].isoformat(), due_multi=day[10].isoformat(),
        due_pdf=day[11].isoformat(), due_loadtest2=day[11].isoformat(),
    )
    for n in (4, 8, 14, 15, 17):
        v[f"iso_d{n}"] = day[n].isoformat()
    stopped = datetime(day[15].year, day[15].month, day[15].day, 5, 58, 13, 402000, tzinfo=UTC)
    v["oom_stopped_at"] = (stopped - timedelta(hours=offset)).isoformat(timespec="milliseconds")
    _generated_blocks(rng, v, stops_both)
    return Details(values=v, start=start, utc_offset=offset, flow_seed=rng.getrandbits(64))


# --------------------------------------------------------------------------- generated blocks

def _generated_blocks(rng: random.Random, v: dict[str, str], stops_both: int) -> None:
    """Tool outputs that are long or numeric: a load-test log, metrics, reports."""
    rps = int(v["rps"])
    p95_before, p95_after = int(v["p95_before"].replace(",", "")), int(v["p95_after"])
    lines = [
        f"loadgen 0.4.1  target=https://staging-api.{v['slug']}.internal  mode=open-loop",
        f"mix: poll=70% status=20% optimize=10%   ramp=120s to {rps} rps, hold 480s",
        "   t     rps  sent   ok  err | poll p50/p95 (ms) | status p50/p95 (ms) | optimize p50/p95 (ms)",
    ]
    totals = {"sent": 0, "err": 0}
    for t in range(6, 601, 6):
        rate = rps * min(1.0, t / 120)
        sent = round(rate * 6 * rng.uniform(0.97, 1.03))
        err = rng.choice((0, 0, 1, 2, 3)) if 40 <= t <= 130 else 0
        load = 0.6 + 0.4 * min(1.0, t / 120)
        opt50 = round(p95_before * 0.55 * load * rng.uniform(0.9, 1.1))
        opt95 = round(p95_before * load * rng.uniform(0.9, 1.1))
        totals["sent"] += sent
        totals["err"] += err
        lines.append(
            f"{t // 60:02d}:{t % 60:02d}  {rate:5.1f}  {sent:4d} {sent - err:4d}  {err:3d} |"
            f"  {rng.randint(9, 16):4d} / {rng.randint(24, 48):4d}     |"
            f"  {rng.randint(6, 11):4d} / {rng.randint(15, 34):4d}       |"
            f"  {opt50:5d} / {opt95:5d}"
        )
    lines += [
        "",
        "summary (hold phase only, 02:00-10:00)",
        "  endpoint                         count     p50     p95     p99    max   errors",
        f"  GET  /v1/drivers/{{id}}/route    {round(totals['sent'] * 0.63):6d}    12ms    33ms    61ms   212ms   0",
        f"  GET  /v1/jobs/{{id}}              {round(totals['sent'] * 0.18):6d}     8ms    21ms    40ms   143ms   0",
        f"  POST /v1/routes/optimize         {round(totals['sent'] * 0.09):6d}  {round(p95_before * 0.55):5d}ms "
        f"{v['p95_before']:>6}ms {v['p99_before']:>6}ms  {v['p99_before']}ms   0",
        f"  errors during ramp: {totals['err']} x 502 Bad Gateway (00:40-02:10)",
        f"  total sent {totals['sent']}, error rate {100 * totals['err'] / totals['sent']:.2f}%",
    ]
    v["loadtest_log"] = "\n".join(lines)
    v["loadtest_after"] = "\n".join([
        "summary (hold phase only, 01:00-05:00)",
        "  endpoint                         count     p50     p95     p99    max   errors",
        f"  GET  /v1/drivers/{{id}}/route    {rps * 168:6d}    11ms    31ms    58ms   190ms   0",
        f"  GET  /v1/jobs/{{id}}              {rps * 48:6d}     8ms    20ms    37ms   121ms   0",
        f"  POST /v1/routes/optimize         {rps * 24:6d}  {round(p95_after * 0.5):5d}ms  {p95_after:5d}ms"
        f"  {round(p95_after * 1.7):5d}ms  {round(p95_after * 3.1)}ms   0",
        f"  errors during ramp: {rng.randint(3, 7)} x 502 Bad Gateway (00:20-00:55)",
    ])
    spans = {"validate_request": 0.004, "load_stops": 0.018, "geocode_check": p95_before / 1000 - 0.04,
             "create_job": 0.011, "enqueue": 0.003}
    v["span_metrics"] = json.dumps({"status": "success", "resultType": "matrix", "result": [
        {"metric": {"span": name}, "values": [[300 * k, f"{base * rng.uniform(0.85, 1.15):.4f}"] for k in range(6)]}
        for name, base in spans.items()]}, indent=1)
    limit = float(v["mem_old"].split()[0]) * 2**30
    mem = [0.17, 0.18, 0.17, 0.18, 0.18, 0.18, 0.18, 0.17, 0.17, 0.45, 0.78, 0.993, 0.0, 0.0]
    v["mem_series"] = json.dumps({"status": "success", "result": [{"metric": {"task": "worker/4f1c9e"}, "values": [
        [f"{v['iso_d15']}T{5 + k // 12:02d}:{5 * (k % 12):02d}:00", str(round(m * limit * rng.uniform(0.97, 1.0)))]
        for k, m in enumerate(mem)]}]})
    manual_km = [rng.randint(1900, 2600), rng.randint(900, 1400)]
    saved = float(v["km_saved_pct"]) / 100
    rows = [
        f"shadow comparison {v['iso_d14']}        manual     {v['product']:<10} delta",
    ]
    for depot, km in zip((v["depot1"], v["depot2"]), manual_km, strict=True):
        ours = km * (1 - saved * rng.uniform(0.9, 1.1))
        rows.append(f"  {depot[:22]:<22} km     {km:7.1f}    {ours:7.1f}   {100 * (ours - km) / km:+.1f}%")
    rows += [
        f"  routes                    {int(v['vehicles_both']) - 2:7d}    {int(v['vehicles_both']) - 3:7d}   -1",
        f"  stops planned             {stops_both:7d}    {stops_both:7d}",
        "  est. window violations          9          0",
        f"  geocode failures (blocking)      -    {v['geo_fail_n']:>7}",
    ]
    v["shadow_report"] = "\n".join(rows)
    fails = [int(v["geo_fail_n"]), rng.randint(4, 9), rng.randint(1, 5)]
    v["shadow_metrics"] = json.dumps({"status": "success", "result": [
        {"day": v[f"iso_d{14}"] if i == 0 else f"day {i + 1}",
         "km_saved_pct": round(saved * 100 * rng.uniform(0.9, 1.1), 1), "geocode_failures": fails[i],
         "routes_ready": ("05:53", "06:41", "05:56")[i], "unassigned": rng.randint(1, 5)} for i in range(3)]})
    v["full_suite"] = _full_suite(rng)
    stops_launch = int(v["stops_launch"].replace(",", ""))
    failed = rng.randint(8, 19)
    ontime = rng.uniform(94.0, 98.5)
    v.update(launch_delivered=f"{stops_launch - failed:,}", launch_failed=str(failed),
             launch_ontime=f"{ontime:.1f}", launch_km=f"{sum(manual_km) * (1 - saved):,.0f}")
    v["launch_metrics"] = json.dumps({"status": "success", "result": [
        {"metric": {"depot": d}, "value": {"stops": n, "failed": f, "on_time_pct": round(ontime + dv, 1)}}
        for d, n, f, dv in ((v["depot1"], stops_launch * 2 // 3, failed // 2, -0.4),
                            (v["depot2"], stops_launch - stops_launch * 2 // 3, failed - failed // 2, 0.7))]})


def _full_suite(rng: random.Random) -> str:
    files = ("api/test_auth.py", "api/test_drivers.py", "api/test_jobs.py", "api/test_move_stop.py",
             "api/test_optimize.py", "geo/test_cache.py", "geo/test_fallback.py", "geo/test_normalize.py",
             "ingest/test_orders.py", "ingest/test_windows.py", "jobs/test_retry.py", "jobs/test_watchdog.py",
             "reports/test_daily.py", "reports/test_pdf.py", "solver/test_manager.py", "solver/test_memory.py",
             "solver/test_pins.py", "solver/test_solve.py", "test_logging_scrub.py", "test_no_direct_connect.py")
    counts = [rng.randint(3, 16) for _ in files]
    total, done, out = sum(counts), 0, []
    for name, n in zip(files, counts, strict=True):
        done += n
        skipped = name == "reports/test_pdf.py"
        dots = "s" * 2 + "." * (n - 2) if skipped else "." * n
        out.append(f"{'tests/' + name + ' ' + dots:<72} [{100 * done // total:3d}%]")
    out += ["", "=========================== short test summary info ============================",
            "SKIPPED [2] tests/reports/test_pdf.py: needs fonts-dejavu (installed in the CI image only)",
            f"{total - 2} passed, 2 skipped in {rng.uniform(70, 95):.2f}s"]
    return "\n".join(out)

# --------------------------------------------------------------------------- the story

_CAST = Cast(speakers={"maya": ("user", "maya"), "liwei": ("user", "li_wei"), "hana": ("user", "hana")},
             lead="maya", acks=ACKS)


@cache
def _story() -> Story:
    scenes = sorted(parse(WEEK1 + WEEK2 + WEEK3 + EXTRA + EXTRA2), key=lambda sc: (sc.day, sc.minute))
    return Story(cast=_CAST, system_prompt=SYSTEM_PROMPT, scenes=tuple(scenes),
                 early_routines=parse(ROUTINES_EARLY), late_routines=parse(ROUTINES_LATE),
                 early_days=(2, 3, 4), late_days=(7, 8, 9, 10, 11, 16, 18), routine_values=_routine_values)


def _routine_values(rng: random.Random, det: Details, day: int) -> dict[str, str]:
    """Details that differ per morning check-in: run ids, counts, today's date, spend."""
    today = det.start + timedelta(days=day)
    month_start = today.replace(day=1)
    if today == month_start:
        month_start = (today - timedelta(days=1)).replace(day=1)
    spend = (today - month_start).days * rng.uniform(37.0, 45.0)
    shares = (("Amazon Elastic Container Service", 0.34), ("Amazon Elastic Compute Cloud - Compute", 0.19),
              ("EC2 - Other", 0.14), ("Amazon Relational Database Service", 0.12),
              ("Amazon ElastiCache", 0.05), ("AmazonCloudWatch", 0.04))
    out = {f"run_id{suffix}": str(rng.randint(9_100_000_000, 9_400_000_000)) for suffix in ("", "2", "3", "4")}
    out.update(
        today_iso=today.isoformat(), yesterday_iso=(today - timedelta(days=1)).isoformat(),
        month_start=month_start.isoformat(), cost_total=f"{spend:,.0f}",
        cost_table="\n".join(f"{name}\t{spend * share * rng.uniform(0.9, 1.1):.2f}" for name, share in shares),
        five_xx=str(rng.randint(2, 9)), jobs_ok=str(rng.randint(14, 40)), job_f=ids(rng, "job_", 8).lower(),
        first_sol=f"{rng.uniform(1.6, 4.2):.2f}", unassigned_median=str(rng.randint(1, 4)),
    )
    return out


def _language(lang: str) -> str:
    if lang not in LANGUAGES:
        raise ValueError(f"no demo conversation in {lang!r}: choose one of {', '.join(LANGUAGES)}")
    return lang


def demo_conversation(seed: int = 7, lang: str = "en") -> list[dict[str, Any]]:
    """A three-week working conversation (about 450 messages in English, 410 in Chinese),
    identical for the same seed and language.

    Each message has ``role``, ``content``, ``created_at`` (UTC, non-decreasing) and, where it
    applies, ``name``, ``tool_calls`` (OpenAI shape) or ``tool_call_id``. ``lang`` is one of
    :data:`LANGUAGES`.
    """
    if _language(lang) == "zh":
        return build(zh.story(), zh.details(seed))
    return build(_story(), _details(seed))


def demo_utc_offset(seed: int = 7, lang: str = "en") -> int:
    """How many hours the demo team's clocks are ahead of UTC: its scenes are written in
    their local time (a 09:19 「早！」 in Hangzhou is 01:19 UTC)."""
    return (zh.details(seed) if _language(lang) == "zh" else _details(seed)).utc_offset


def demo_questions(seed: int = 7, lang: str = "en") -> list[DemoQuestion]:
    """Questions answered once, early in ``demo_conversation(seed, lang)``, with verbatim evidence."""
    if _language(lang) == "zh":
        return zh.questions(seed)
    v = _details(seed).values
    q: list[tuple[str, str, str]] = [
        ("What p95 latency target did we agree for POST /v1/routes/optimize?", f"{v['p95_ms']} ms",
         f"p95 under {v['p95_ms']} ms for POST /v1/routes/optimize"),
        ("What hard time limit does the route solver get per solve?", f"{v['solver_limit']} seconds",
         f"hard time limit of {v['solver_limit']} seconds per solve"),
        (f"How many drivers does {v['customer']} run out of its original depot?", v["drivers"],
         f"runs {v['drivers']} drivers out of a single depot"),
        ("What default vehicle capacity did we assume?", f"{v['van_cap']} totes per van",
         f"Assume {v['van_cap']} totes per van as the default"),
        ("What monthly cloud budget was approved for the pilot?", f"{v['budget']} a month",
         f"approved {v['budget']} a month for cloud"),
        (f"Who is our contact at {v['customer']}, and what is their role?",
         f"{v['contact']}, {v['contact_role']}", f"our contact there is {v['contact']}, their {v['contact_role']}"),
        ("Which test framework does Maya prefer?", "pytest (over unittest)", "I prefer pytest over unittest"),
        ("Which exact OR-Tools version did we pin?", f"ortools=={v['ortools']}", f'"ortools=={v["ortools"]}"'),
        ("What TTL did 李伟 propose for cached geocoding results?", f"{v['ttl']} days", f"TTL 设成 {v['ttl']} 天"),
        ("Who owns the Terraform and reviews infrastructure changes?", v["ops"], f"{v['ops']} owns the Terraform"),
        ("How often does the driver app poll for route changes in the foreground?", f"every {v['poll_s']} seconds",
         f"every {v['poll_s']} seconds while the app is in the foreground"),
        ("How does Maya want answers formatted by default?", "bullet points, prose only when asked",
         "always answer with bullet points unless I explicitly ask for prose"),
    ]
    return [DemoQuestion(question, answer, evidence) for question, answer, evidence in q]
