"""Hand-written text for the demo conversation (see :mod:`lossless.demo_data`).

Original content written for this project. Each scene is a small script:

* ``%%% day=N at=HH:MM [opt=P]`` starts a scene on day ``N`` (0 = the first Monday) at about
  ``HH:MM`` UTC; ``opt`` is the probability that an optional scene is included.
* ``%% maya`` / ``%% liwei`` / ``%% hana`` start a user message from that person,
  ``%% ai`` an assistant message, ``%% ack`` a short acknowledgement from Maya,
  ``%% gap M`` a pause of about ``M`` minutes.
* ``%% call NAME {json}`` is a tool call (consecutive calls share one assistant message; an
  ``%% ai`` block right before them becomes that message's text) and ``%% result`` the
  tool's answer, one per call, in order.

In the text, ``<<key>>`` is a seed-drawn detail and ``{{a|b|c}}`` picks one variant.
"""

from __future__ import annotations

SYSTEM_PROMPT = r"""You are Atlas, a coding and planning assistant working with the engineering team at <<company>>. The team is building <<product>>, a delivery-routing service; the repository is github.com/<<company_slug>>/<<slug>>.

Tools: run_tests (pytest in the repo), read_file, run_shell (a sandbox with the repo checked out and read-only cloud credentials), search_code, query_metrics (PromQL against the staging and production Prometheus) and create_ticket (the team tracker).

Rules:
- Show a command before running anything that changes state; never push to main, never run destructive commands without an explicit yes.
- Say so when you are unsure, and say what would settle it.
- Several people use this thread; the speaker's name is on each message. Answer people in the language they write in.
- Keep answers short unless asked for a document."""

ACKS: tuple[str, ...] = (
    "thanks!",
    "ok",
    "ok thanks",
    "perfect",
    "great, thanks",
    "got it",
    "👍",
    "nice",
    "cool",
    "makes sense",
    "ok, on it",
    "thank you!",
)

WEEK1 = r"""
%%% day=0 at=09:05
%% maya
Morning! I'm Maya Chen, tech lead at <<company>>. We're a team of five and we're building <<product>>, a delivery-routing service. The idea: every morning a dispatcher uploads the day's orders and the driver shifts, we hand back routes that respect delivery time windows and van capacity, and the drivers get their stop list on a phone app.

Our first pilot customer is <<customer>> in <<city>>. I'd like you to be our planning and coding partner for the next few weeks while we get the pilot live. Before we start: what do you need to know from me?
%% ai
Good morning, Maya — happy to help get <<product>> to a pilot. Here's what would help me most, roughly in order of how much it changes the design:

- **Scale:** orders per day, number of drivers, number of depots, and how spiky the volume is (weekday vs. Friday, seasonal peaks).
- **Constraints:** are time windows hard or soft? Vehicle capacity — in what unit (weight, volume, items)? Driver breaks, shift lengths, maximum route duration?
- **Inputs:** how do orders arrive today — CSV export, an API from their shop system, something else? Are addresses already geocoded?
- **Timing:** when do routes have to be ready in the morning, and how long will a dispatcher wait for a result?
- **Infrastructure:** cloud provider, anything already running, and how much operational overhead the team can absorb.
- **Team:** who works on what, so I know who I'm talking to.
- **Existing code:** prototypes, notebooks, anything we should keep or throw away.
- **Deadline:** when the pilot needs to be live, and what "live" means to the customer.

If you only have time for one thing right now, scale and deadline matter most.
%% maya
Team first, since people will start talking to you today:

- me: backend and most infra decisions
- 李伟 (Li Wei): backend, mostly solver and geocoding. He'll sometimes write to you in Chinese — that's fine, answer him in Chinese
- Hana Sato: mobile, she's building the driver app in React Native. She's based in Osaka so her evenings overlap with our mornings
- <<pm>>: product, and owns the relationship with <<customer>>
- <<ops>>: infra, part-time ({{also does IT for the whole company, poor thing|also our entire IT department}})

Existing code: a notebook Li Wei wrote with OR-Tools that solved a 60-stop toy instance. Nothing in production. Scale and deadline I'll get you after my call with <<pm_first>> this morning.
%% ai
Thanks — that's a clear picture. A few notes:

- I'll answer Li Wei in Chinese and keep technical terms (Redis, TTL, API names) in English so they stay searchable.
- Hana's timezone means her questions are best answered async with complete examples — I'll include request/response samples rather than describing shapes in words.
- Li Wei's notebook is a good starting point for the solver model even if none of the code survives. I'd like to read it before proposing a structure.
- With <<ops_first>> part-time, I'll bias toward managed services and away from anything that needs a person on call for infrastructure.

I'll wait for the numbers from your call.
%% maya
One more thing, a preference: always answer with bullet points unless I explicitly ask for prose. I read most of this on my phone between meetings and walls of text kill me.
%% ai
- Understood: bullets by default.
- Prose only when you ask for it (design docs, customer-facing text).
- Code stays in fenced blocks either way.
%% maya
{{perfect|great|perfect, thanks}}

%%% day=0 at=11:40
%% maya
Back from the call. Numbers:

- <<customer>> runs <<drivers>> drivers out of a single depot in <<depot1>> today, about <<stops>> stops on a normal weekday and roughly 30% more on Fridays
- time windows are mostly 2-hour slots the end customer picks at checkout; some orders just say "before noon"
- our contact there is <<contact>>, their <<contact_role>>. <<contact_first>> is the person who'll actually use the dispatcher screen every morning
- orders come as a CSV export from their shop platform, addresses not geocoded
%% ai
- **Problem class:** a capacitated vehicle routing problem with time windows (CVRPTW), single depot for now.
- **Size per solve:** one day's stops for the whole fleet in one model is within reach for OR-Tools at this scale, but we should time it early — Friday peaks are the real test.
- **Time windows:** 2-hour slots are hard constraints unless the customer says otherwise; "before noon" becomes a window from shift start to 12:00.
- **Geocoding:** un-geocoded addresses mean we need a geocoding step with caching, plus a review queue for addresses that fail.
- **CSV:** we need a tolerant importer — column names, date formats and encodings in shop exports vary more than anyone expects.
- **Open question:** capacity. What do they count — weight, volume, parcels?
%% maya
Capacity: they deliver in reusable totes, so count totes, not kg. Assume <<van_cap>> totes per van as the default. A couple of their vans are bigger, but we can make capacity per-vehicle later.
%% ai
- Totes are the nicest possible unit: integers, no weight/volume conversion.
- I'll model capacity as a per-vehicle field from day one with a configurable default, so the bigger vans become a data change later, not a code change.
- Each order gets a `totes` count; if the CSV doesn't have one, default to 1 and flag the row.
- Worth asking <<contact_first>>: can a single order ever exceed one van? If so we need order splitting, which I'd rather keep out of the pilot.
%% maya
I'll ask. My guess is no, they're groceries not furniture.
%% ai
- Agreed, very likely no.
- I'll still make the importer reject an order bigger than the largest vehicle with a clear error instead of letting the solver report "infeasible" with no explanation.

%%% day=0 at=14:20
%% maya
Let's talk stack. Constraints: we know Python well, we're already on AWS for the marketing site, and I don't want to run Kubernetes for a five-person team. What would you pick?
%% ai
- **API:** Python 3.12 + FastAPI. Async is handy for the I/O-heavy parts (geocoding, matrix requests), and pydantic models double as the API contract Hana can read.
- **Solver:** OR-Tools' routing library, running in separate worker processes, never inside the API process. Solves are CPU-bound and long; isolating them keeps the API responsive and lets us cap memory per solve.
- **Queue:** Redis with a small job library (arq or RQ). Celery is more than we need and its failure modes are harder to reason about.
- **Database:** Postgres 16 with PostGIS on RDS. Orders, stops, routes and geocodes are relational; PostGIS gives us distance sanity checks and spatial indexes for "stops near X" queries.
- **Road distances:** self-hosted OSRM on one EC2 instance. Reason below — it's mostly about cost.
- **Hosting:** ECS on Fargate for the API and workers, RDS and ElastiCache managed. No Kubernetes, no servers to patch except the OSRM box.
- **Rejected:** Kubernetes (operational weight), DynamoDB (we want joins and ad-hoc SQL during the pilot), a hosted routing API as the core (we'd be reselling someone else's optimizer with no control over quality).
%% maya
Why not just call Google's distance matrix API instead of OSRM? OSRM sounds like one more thing to babysit.
%% ai
- Fair concern, but the numbers decide it:
  - A full travel-time matrix for N stops is N² elements. At ~1,000 stops that's ~1,000,000 elements per solve.
  - Hosted matrix APIs bill per element; list prices are on the order of a few dollars per 1,000 elements, so one full matrix costs thousands of dollars. Per solve. Every morning.
  - Even with clever sparsification (only nearby pairs) we'd be in the hundreds per day.
- OSRM on a single memory-optimized instance answers a 1,000×1,000 table request in seconds, for a flat monthly cost.
- Babysitting is real but small: the data is rebuilt from OpenStreetMap extracts on a schedule, and the process is stateless. If it dies, ECS or systemd restarts it.
- Trade-off: OSRM doesn't know live traffic. For a grocery pilot with 2-hour windows, typical-speed profiles are good enough; we can add a per-hour slowdown factor later if the ETAs drift.
%% maya
Ha, ok, that settles it. OSRM it is. <<pm_first>> approved <<budget>> a month for cloud for the pilot, all in. Does the stack fit?
%% ai
- Rough monthly estimate, on-demand prices, staging + production:
  - RDS Postgres (db.t4g.medium prod, db.t4g.small staging): ~$140
  - ElastiCache Redis (cache.t4g.small × 2): ~$60
  - Fargate (API 2 tasks, workers 2–4 tasks, staging half that): ~$420
  - OSRM on r6g.xlarge (prod) + r6g.large (staging, stopped nights): ~$230
  - Geocoding API calls with caching: ~$150, front-loaded in the first weeks
  - Load balancers, NAT, logs, backups, S3: ~$250
- Total: ~$1,250/month, comfortably inside what <<pm_first>> approved, leaving room for a bigger solver worker if Friday peaks need it.
- Biggest uncertainty: NAT gateway traffic if OSRM and the workers end up in different subnets — we'll keep them together.
%% maya
great. write that down somewhere, I'll forget everything by Thursday
%% ai
Here's a first decision record; I'll put it at `docs/decisions/0001-stack.md` when the repo exists:

```markdown
# 0001 — Stack for the <<customer>> pilot

Status: accepted (Maya Chen)

## Decision
- Python 3.12, FastAPI, pydantic v2
- OR-Tools routing solver in dedicated worker processes (ECS tasks)
- Redis for the job queue and hot caches
- Postgres 16 + PostGIS on RDS
- Self-hosted OSRM for travel-time matrices
- ECS Fargate; no Kubernetes

## Why
- Team knows Python; FastAPI gives typed contracts for the mobile app
- Solves are CPU-bound and long: isolate them from the API
- Hosted distance matrices cost O(N²) per solve; OSRM is a flat cost
- Managed services because infra is staffed part-time

## Revisit when
- a customer needs live traffic, or
- a single solve exceeds what one worker can hold in memory
```

%%% day=0 at=17:35 opt=0.7
%% maya
ok I'm done for today, brain is mush. tomorrow: design doc?
%% ai
- Sounds good. I'll have an outline ready for the morning.
- If you find Li Wei's notebook, drop the path here and I'll read it first.
%% maya
it's in the old `prototypes` repo, `notebooks/vrp_toy.ipynb`. night!

%%% day=1 at=08:50
%% maya
Morning. Can you write the design doc now? Prose is fine for this one, it's going in the repo. Cover the components, the data model, the request flow, the solver approach, failure modes, and what we're explicitly not doing. Leave the SLO numbers as TBD — <<pm_first>> and I are finalizing them with <<contact_first>> this week.
%% ai
# <<product>> — design for the <<customer>> pilot

## Purpose

<<product>> turns a day of delivery orders and a set of driver shifts into routes: an ordered list of stops per driver, with arrival times that respect each order's delivery window and each vehicle's capacity. The first customer is <<customer>>, a grocery delivery business in <<city>>. This document describes the system we intend to build for the pilot, the reasons for the main choices, and the things we are deliberately leaving out. It is meant to be read once by everyone on the team and then consulted when a decision is in doubt.

## Users and the daily cycle

The primary user is a dispatcher at the customer. Their morning looks like this: the shop platform closes orders for the day at a cut-off time the evening before; early in the morning the dispatcher exports the orders as a CSV and uploads it to <<product>> together with the list of drivers on shift, presses "optimize", checks the result on a map, makes a few manual adjustments, and publishes the routes. Drivers then open the driver app, see their stops in order, and work through them, marking each stop as delivered or failed.

The secondary users are the drivers. They do not interact with optimization at all; they need a reliable, current list of stops, navigation hand-off to their maps app of choice, and a way to report what happened at each stop.

## Components

The system has five parts.

The **API** is a FastAPI application. It accepts uploads, exposes orders, routes and jobs, serves the dispatcher web UI's data and the driver app's endpoints, and enqueues optimization jobs. It does no heavy computation. Every request it serves should be answered from the database or a cache.

The **worker** pool runs optimization jobs. A job loads the day's stops and vehicles, obtains a travel-time matrix, builds an OR-Tools routing model, solves it under a time limit, and writes the resulting routes back to the database. Workers are separate ECS tasks with their own memory limits, so a large solve cannot take the API down with it.

The **geocoder** is a module used by the importer and by a background job. It normalizes addresses, looks them up in our cache, and calls the external geocoding service (<<geocoder>>) for misses. Addresses that fail or come back with low confidence go to a review queue the dispatcher can work through.

The **matrix service** is a self-hosted OSRM instance built from OpenStreetMap data for the <<city>> region. Workers ask it for duration and distance tables. We keep a thin client around it that batches requests and retries on timeouts.

The **driver app** is a React Native application built by Hana. It talks only to the API's driver endpoints and polls for route changes.

## Data model

The core tables are: `depots`, `vehicles` (with a per-vehicle capacity in totes and an optional home depot), `shifts` (a vehicle and a driver for a given day, with start and end times), `orders` (an external id from the shop platform, an address, a delivery window, a tote count), `geocodes` (normalized address to coordinates, with source, confidence and timestamp), `jobs` (an optimization request, its status, its parameters and timing), `routes` (a shift's ordered stops for a job, with planned arrival times) and `stop_events` (what actually happened at a stop, reported by the driver).

Two rules keep this model honest. First, nothing that a dispatcher or driver has seen is ever updated in place: a re-optimization creates a new job and new routes, and publishing points the day at one job. This makes "what did the driver see at 09:14?" answerable. Second, all times are stored as UTC with the depot's time zone kept on the depot row; conversion happens at the edges. Time zones are the single most likely source of subtle bugs in this domain.

## Request flow

An upload is parsed and validated synchronously, because the dispatcher needs immediate feedback on bad rows. Geocoding of new addresses starts in the background immediately after the upload. When the dispatcher presses "optimize", the API validates that every stop has coordinates (or has been excluded), creates a job row, enqueues it, and returns the job id. The UI polls the job until it is done. The worker picks up the job, requests the matrix from OSRM, solves, stores the routes and marks the job finished. If the dispatcher makes manual changes, they are stored as a new version of the affected routes, with the job as parent.

## Solver approach

We model the problem as a capacitated vehicle routing problem with time windows using OR-Tools' routing library. Each stop is a node with a service time and a time window; each vehicle has a start and end at its depot, a capacity, and a shift window. Time is modeled as a cumulative dimension in seconds, with waiting allowed (a driver may arrive early and wait). Capacity is a second dimension in totes.

We find a first solution with the path-cheapest-arc strategy and improve it with guided local search under a fixed time limit. Every stop is optional with a large penalty for dropping it, so an over-constrained day produces a solution with a few unassigned stops instead of no solution at all; the dispatcher sees the unassigned stops and decides what to do with them. Stops that must go to a particular driver are restricted to that vehicle.

The solver is deterministic for a given input and parameters only if it runs single-threaded with a solution or iteration limit; under a pure time limit the result depends on machine speed. For production we accept that; for tests we use iteration limits.

## Service levels

Latency target for submitting an optimization: TBD. Solver time limit: TBD. Routes ready by: TBD, expected early morning local time. These will be set with the customer this week.

## Failure modes

If OSRM is down, jobs fail fast with a clear message and are retried with backoff; the dispatcher sees "routing service unavailable" rather than a spinner. If geocoding is down, uploads still succeed and stops are queued for geocoding; optimization is blocked only for stops without coordinates. If a worker dies mid-solve, the job is re-enqueued once and then marked failed. If the solver finds no feasible assignment for some stops, those stops are returned as unassigned with the reason the solver can tell us (capacity, window, shift). If the database is unavailable, nothing works, and we accept that: RDS with automated backups and a multi-AZ option for production is our answer.

## What we are not doing

No real-time traffic. No re-optimization in the middle of the day. No multi-day planning. No driver breaks beyond what fits into shift windows. No order splitting across vehicles. No customer-facing ETAs or notifications; the shop platform owns customer communication. No self-service onboarding: we configure the pilot customer by hand.

## Open questions

Whether Friday peaks fit in a single solve within the time limit. How often the customer's addresses fail geocoding. Whether dispatchers will accept routes they did not draw themselves — this is the real risk of the pilot, and the only way to find out is the shadow run.
%% maya
This is good. Two notes:

1. dispatchers will want to lock some stops to specific drivers — regulars who always do the same care-home run. You mention it in one sentence, make it a real section
2. "re-optimize mid-day" should be explicitly out of scope AND explain why, otherwise <<pm_first>> will promise it to someone
%% ai
- **Locked stops** — new section "Pinned stops":
  - A stop can be pinned to a vehicle (hard: only that vehicle may serve it) or preferred for a vehicle (soft: a penalty if served by another).
  - Hard pins use `routing.SetAllowedVehiclesForIndex([vehicle], index)`; soft preferences become a per-vehicle cost on the node.
  - Pins are stored on the order (`pinned_vehicle_id`, `pin_kind`), so they survive re-uploads of the same order id.
  - The UI shows pinned stops with a lock icon; the solver never moves them to another driver.
- **Mid-day re-optimization** — expanded "Not doing":
  - Once drivers are on the road, changing their stop order costs more trust than it saves kilometres; drivers stop following the app.
  - It needs live positions, partial-route freezing and push notifications, none of which the pilot has.
  - For the pilot, mid-day changes are manual: the dispatcher moves a stop, the driver app picks it up on the next poll.
%% maya
👍 commit it as docs/design.md
%% ai
Committing on a branch so it can go through review like everything else.
%% call run_shell {"cmd": "git checkout -b docs/design && git add docs/design.md docs/decisions/0001-stack.md && git commit -m 'docs: design doc and stack decision for the pilot'"}
%% result
Switched to a new branch 'docs/design'
[docs/design <<sha1>>] docs: design doc and stack decision for the pilot
 2 files changed, 171 insertions(+)
 create mode 100644 docs/decisions/0001-stack.md
 create mode 100644 docs/design.md
%% ai
- Committed as `<<sha1>>` on `docs/design`.
- Not pushed — say the word and I'll push and open the PR with you and <<pm_first>> as reviewers.
%% maya
push it, add Li Wei too
%% call run_shell {"cmd": "git push -u origin docs/design && gh pr create --title 'Design doc for the pilot' --body 'Design and stack decision. Please read before Thursday.' --reviewer maya-chen,liwei-dev,<<pm_handle>>"}
%% result
branch 'docs/design' set up to track 'origin/docs/design'.
https://github.com/<<company_slug>>/<<slug>>/pull/3
%% ai
- PR #3 is open with you, Li Wei and <<pm_first>> as reviewers.

%%% day=1 at=11:15
%% maya
Let's scaffold the actual service repo. src layout, package `<<slug>>`, Python 3.12. Show me the pyproject first.
%% ai
- Layout: `src/<<slug>>/` with subpackages `api`, `ingest`, `geo`, `solver`, `jobs`, `db`; `tests/` mirrors it.
- Pins: exact versions for the solver (reproducibility), compatible ranges for the rest.

```toml
[project]
name = "<<slug>>"
version = "0.1.0"
requires-python = ">=3.12"
dependencies = [
    "fastapi>=<<fastapi>>,<1",
    "uvicorn[standard]>=0.29",
    "pydantic>=2.7",
    "psycopg[binary,pool]>=3.1",
    "redis>=5",
    "arq>=0.26",
    "httpx>=0.27",
    "ortools==<<ortools>>",
    "numpy>=1.26",
]

[project.optional-dependencies]
dev = ["pytest>=8", "pytest-asyncio>=0.23", "mypy>=1.10", "ruff>=0.4"]

[tool.pytest.ini_options]
testpaths = ["tests"]
addopts = "-q --strict-markers"
markers = ["slow: solver runs longer than a second"]
```

- Why the exact OR-Tools pin: its search heuristics change between releases, so identical inputs can give different routes after an upgrade. We want upgrades to be a deliberate PR with route diffs, not a side effect of a rebuild.
%% maya
Looks right. For the record: I prefer pytest over unittest — plain asserts and fixtures, no TestCase classes please. Li Wei's prototype tests are unittest; let's convert them as we touch them.
%% ai
- Noted: pytest style everywhere — plain `assert`, fixtures in `conftest.py`, `parametrize` instead of loops.
- When I touch a file with `unittest.TestCase` classes I'll convert the whole file in the same PR, not piecemeal.
- Creating the skeleton now.
%% call run_shell {"cmd": "mkdir -p src/<<slug>>/{api,ingest,geo,solver,jobs,db} tests && touch src/<<slug>>/__init__.py src/<<slug>>/{api,ingest,geo,solver,jobs,db}/__init__.py && python -m venv .venv && .venv/bin/pip install -q -e '.[dev]' && tree -L 3 src tests"}
%% result
src
└── <<slug>>
    ├── __init__.py
    ├── api
    │   └── __init__.py
    ├── db
    │   └── __init__.py
    ├── geo
    │   └── __init__.py
    ├── ingest
    │   └── __init__.py
    ├── jobs
    │   └── __init__.py
    └── solver
        └── __init__.py
tests

8 directories, 7 files
%% ai
Adding a health endpoint and two smoke tests so CI has something to run.
%% call run_tests {"path": "tests/", "args": ["-q"]}
%% result
{"exit_code": 0, "passed": 2, "failed": 0, "skipped": 0, "duration_s": 0.41, "output": "..                                                           [100%]\n2 passed in 0.41s"}
%% ai
- Skeleton in place, `GET /healthz` returns `{"status": "ok", "version": "0.1.0"}`.
- 2 tests pass (`test_healthz`, `test_version_matches_package`).
- Next: the CSV importer, since everything downstream needs orders in the database.
%% ack

%%% day=1 at=15:05
%% liwei
你好，我是李伟。Maya 说我可以直接用中文问你。

我现在在做地理编码（geocoding）这部分：客户的地址先调用 <<geocoder>> 的 API 转成经纬度，然后存到 Postgres。我想加一层缓存，避免同一个地址每天重复调用，因为很多客户每周都会下单。我的想法是用标准化之后的地址字符串做 key，结果存在 Redis 里，TTL 设成 <<ttl>> 天。你觉得这个 TTL 合理吗？
%% ai
李伟你好！这个方向很好，几点想法：

- **TTL 本身是合理的**：一个地址对应的坐标很少变化，缓存时间长一点没问题，可以大幅减少 API 调用费用。
- **但建议分两层**：
  - Postgres 里的 `geocodes` 表做持久缓存（永久保存，记录 `source`、`confidence`、`geocoded_at`），这才是真正的 "source of truth"；
  - Redis 只做热缓存，用来加速导入时的批量查询。这样 Redis 被清空或者重启也不会重新产生费用。
- **key 的设计**：建议加上版本前缀，比如 `geo:v1:<sha1(标准化地址)>`。以后标准化规则改了，只要把 v1 改成 v2，旧的 key 自然过期，不用手动清理。
- **低置信度的结果**：<<geocoder>> 返回的 confidence 比较低的（比如只匹配到街道级别），不要缓存成正常结果，应该进人工审核队列。
%% liwei
好主意，两层的方案我同意。还有一个问题：标准化的时候，要不要把门牌号后面的 "Apt"、"Unit"、"#3" 这些去掉？去掉的话缓存命中率会高很多。
%% ai
- **坐标层面可以去掉**：同一栋楼不同单元，地理编码的结果基本是一样的，所以生成缓存 key 的时候去掉单元号没问题。
- **但原始地址一定要保留**：司机需要看到完整地址（包括单元号），不然会送错门。
- 所以建议拆成两个字段：
  - `geocode_key`：去掉单元号、统一大小写和缩写之后的字符串，只用于缓存；
  - `display_address`：原样保存，给司机和调度员看。

大概是这样：

```python
import re

_UNIT = re.compile(r"\b(apt|apartment|unit|suite|ste|flat|#)\s*[\w-]+", re.IGNORECASE)
_SPACES = re.compile(r"\s+")

def geocode_key(address: str, postcode: str) -> str:
    street = _UNIT.sub("", address)
    street = street.replace(".", "").replace(",", " ")
    street = _SPACES.sub(" ", street).strip().lower()
    return f"{street}|{postcode.replace(' ', '').upper()}"
```

- 记得给这个函数写 pytest 的参数化测试，把客户 CSV 里几种奇怪的写法都放进去。
%% liwei
明白了，谢谢！我今晚写完就提 PR。
%% ai
不客气！PR 提了以后可以叫我帮你 review。

%%% day=2 at=09:20
%% maya
<<ops_first>> is setting up staging today. Ground rule: <<ops>> owns the Terraform, so anything infra goes through a PR to the `infra` repo and <<ops_first>> reviews it. Don't apply anything yourself.

Staging DB will be RDS Postgres 16 at `staging-db.<<slug>>.internal`, plain port 5432, database `<<slug>>_staging`. Can you write a docker-compose for local dev that mirrors it?
%% ai
- Noted: infra changes are PRs to `infra`, <<ops_first>> reviews and applies.
- Local stack mirrors staging: Postgres 16 with PostGIS, Redis 7, OSRM on a small extract.

```yaml
services:
  db:
    image: postgis/postgis:16-3.4
    environment:
      POSTGRES_USER: <<slug>>
      POSTGRES_PASSWORD: dev
      POSTGRES_DB: <<slug>>_dev
    ports: ["5432:5432"]
    volumes: ["pgdata:/var/lib/postgresql/data"]
    healthcheck:
      test: ["CMD-SHELL", "pg_isready -U <<slug>>"]
      interval: 5s
  redis:
    image: redis:7-alpine
    ports: ["6379:6379"]
  osrm:
    image: ghcr.io/project-osrm/osrm-backend:v5.27.1
    command: osrm-routed --algorithm mld /data/region.osrm
    volumes: ["./data/osrm:/data"]
    ports: ["5000:5000"]
volumes:
  pgdata: {}
```

```dotenv
# .env.example
DATABASE_URL=postgresql://<<slug>>:dev@localhost:5432/<<slug>>_dev
REDIS_URL=redis://localhost:6379/0
OSRM_URL=http://localhost:5000
GEOCODER_API_KEY=changeme
```
%% maya
why postgis/postgis:16-3.4 and not the plain postgres image?
%% ai
- Staging is RDS Postgres 16 with the PostGIS extension enabled, and we'll use `geography` columns and `ST_DWithin` in the stop queries.
- The plain image doesn't ship PostGIS; we'd have to build our own image to get it.
- `16-3.4` = Postgres 16, PostGIS 3.4, which matches what RDS offers for 16.x.
%% maya
{{ok|ok, fair|makes sense}}

%%% day=2 at=11:05
%% maya
Can you build the OSRM data for <<city>>? There's a stub at `scripts/build_osrm.sh` that Li Wei started.
%% call read_file {"path": "scripts/build_osrm.sh"}
%% result
#!/usr/bin/env bash
set -euo pipefail
# TODO: download extract, run osrm-extract / partition / customize
REGION=${1:?usage: build_osrm.sh <region>}
echo "building $REGION"
%% ai
- The stub only parses the argument. Plan:
  - download the Geofabrik extract for the region,
  - `osrm-extract` with the car profile,
  - `osrm-partition` + `osrm-customize` (MLD, so we can update speeds later without a full rebuild),
  - write the result to `data/osrm/region.osrm*`.
%% call run_shell {"cmd": "scripts/build_osrm.sh <<region_slug>> 2>&1 | tail -n 18", "timeout_s": 1800}
%% result
[info] Input file: <<region_slug>>-latest.osm.pbf
[info] Profile: car.lua
[info] Threads: 4
[info] Parsing in progress..
[info] input file generated by osmium/1.16.0
[info] Parsing finished after 41.7 seconds
[info] Raw input contains 14822197 nodes, 2419330 ways, and 51922 relations
[info] Sorting used nodes        ... ok, after 1.3s
[info] Computing edge weights    ... ok, after 8.9s
[info] Writing 1844102 edge based nodes
[info] Expansion: 96831 nodes/sec and 41992 edges/sec
[info] extraction finished after 193.2s
[info] Partitioning: 5 levels, 1844102 cells
[info] MLD partition finished after 77.4s
[info] Customizing ... ok, after 21.6s
[info] RAM: peak bytes used: 6218433024
[info] finished
build done: data/osrm/region.osrm (26 files, 1.9G)
%% ai
- Built in about 5 minutes; peak memory ~6.2 GB during extraction.
- That peak is only for building. Serving the region needs far less, so the r6g.large is enough for staging and we build the data in CI or on a throwaway instance.
- Quick sanity check against the running container:
%% call run_shell {"cmd": "curl -s 'http://localhost:5000/table/v1/driving/<<lonlat_a>>;<<lonlat_b>>;<<lonlat_c>>?annotations=duration,distance' | jq -c '{durations, distances}'"}
%% result
{"durations":[[0,612.4,948.1],[598.2,0,701.9],[955.3,688.0,0]],"distances":[[0,7412.6,11892.2],[7290.1,0,8044.7],[11903.8,7968.5,0]]}
%% ai
- Durations in seconds, distances in metres. The asymmetry (612 s vs 598 s) is expected: one-way streets and turn restrictions.
- Depot to the farthest test point is ~16 minutes, which looks plausible for the area.
%% maya
nice, thanks!

%%% day=2 at=14:30
%% maya
Li Wei's importer is blowing up on <<customer>>'s sample CSV:

```text
Traceback (most recent call last):
  File "/app/src/<<slug>>/ingest/cli.py", line 37, in main
    batch = load_orders(path, depot=depot)
            ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/app/src/<<slug>>/ingest/orders.py", line 88, in load_orders
    window = parse_window(row["delivery_slot"], day=row_day, tz=depot.tz)
             ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/app/src/<<slug>>/ingest/windows.py", line 47, in parse_window
    if start < shift_start:
       ^^^^^^^^^^^^^^^^^^^
TypeError: can't compare offset-naive and offset-aware datetimes
```

Also about 40 rows are rejected with `unrecognised time window: 'Before 12pm'`.
%% call read_file {"path": "src/<<slug>>/ingest/windows.py", "start_line": 30, "end_line": 60}
%% result
30  _SLOT = re.compile(r"^(\d{1,2}):(\d{2})\s*-\s*(\d{1,2}):(\d{2})$")
31
32
33  def parse_window(text: str, day: date, tz: str) -> tuple[datetime, datetime]:
34      m = _SLOT.match(text.strip())
35      if m is None:
36          raise ValueError(f"unrecognised time window: {text!r}")
37      h1, m1, h2, m2 = (int(g) for g in m.groups())
38      start = datetime(day.year, day.month, day.day, h1, m1)
39      end = datetime(day.year, day.month, day.day, h2, m2)
40      zone = ZoneInfo(tz)
41      end = end.replace(tzinfo=zone)
42      if end <= start.replace(tzinfo=zone):
43          raise ValueError(f"empty time window: {text!r}")
44
45      # clamp to the depot's shift start so early slots are not impossible
46      shift_start = datetime.combine(day, time(7, 0), tzinfo=zone)
47      if start < shift_start:
48          start = shift_start
49      return start.astimezone(UTC), end.astimezone(UTC)
%% ai
- **Bug 1 (the TypeError):** `start` never gets a `tzinfo` — line 41 attaches the zone to `end` only, and line 42 attaches it to a temporary copy of `start`. Comparing naive `start` with aware `shift_start` fails.
- **Bug 2 (the rejects):** the regex only knows `HH:MM-HH:MM`. "Before 12pm" (and probably "After 4pm", "12pm-2pm") need their own patterns.
- Also worth fixing: shift start is hard-coded to 07:00; it should come from the depot.

Patch:

```python
_SLOT = re.compile(r"^(\d{1,2})(?::(\d{2}))?\s*(am|pm)?\s*-\s*(\d{1,2})(?::(\d{2}))?\s*(am|pm)?$", re.I)
_BEFORE = re.compile(r"^before\s+(\d{1,2})(?::(\d{2}))?\s*(am|pm)?$", re.I)


def _hm(hour: str, minute: str | None, ampm: str | None) -> time:
    h = int(hour) % 12 + (12 if (ampm or "").lower() == "pm" else 0) if ampm else int(hour)
    return time(h, int(minute or 0))


def parse_window(text: str, day: date, depot: Depot) -> tuple[datetime, datetime]:
    zone = ZoneInfo(depot.tz)
    text = text.strip()
    if m := _BEFORE.match(text):
        start_t, end_t = depot.shift_start, _hm(*m.groups())
    elif m := _SLOT.match(text):
        start_t, end_t = _hm(*m.groups()[:3]), _hm(*m.groups()[3:])
    else:
        raise ValueError(f"unrecognised time window: {text!r}")
    start = datetime.combine(day, max(start_t, depot.shift_start), tzinfo=zone)
    end = datetime.combine(day, end_t, tzinfo=zone)
    if end <= start:
        raise ValueError(f"empty time window: {text!r}")
    return start.astimezone(UTC), end.astimezone(UTC)
```
%% call run_tests {"path": "tests/ingest/test_windows.py", "args": ["-q"]}
%% result
{"exit_code": 1, "passed": 11, "failed": 1, "skipped": 0, "duration_s": 0.38, "output": "...........F\n=================================== FAILURES ===================================\n_________________ test_parse_window[12pm-2pm-expected7] _________________\n\n    assert parse_window(text, DAY, DEPOT) == expected\nE   AssertionError: assert (datetime(2025, 1, 1, 0, 0, tzinfo=UTC), ...) == (datetime(2025, 1, 1, 12, 0, tzinfo=UTC), ...)\n\ntests/ingest/test_windows.py:41: AssertionError\n1 failed, 11 passed in 0.38s"}
%% ai
- The 12-hour conversion is wrong for 12pm: `12 % 12 + 12` is right, but my conditional expression binds the `if ampm` to the whole sum, and "12pm" without minutes takes the other branch. Rewriting `_hm` without the clever one-liner:

```python
def _hm(hour: str, minute: str | None, ampm: str | None) -> time:
    h = int(hour)
    if ampm:
        h = h % 12 + (12 if ampm.lower() == "pm" else 0)
    return time(h, int(minute or 0))
```
%% call run_tests {"path": "tests/ingest/", "args": ["-q"]}
%% result
{"exit_code": 0, "passed": 19, "failed": 0, "skipped": 0, "duration_s": 0.52, "output": "...................                                      [100%]\n19 passed in 0.52s"}
%% ai
- All 19 ingest tests pass, including new cases for "Before 12pm", "12pm-2pm", "9-11am" and a DST-change day.
- Re-running the sample CSV: 0 rejected rows (was ~40), no TypeError.
- I'll tell Li Wei the `parse_window` signature changed (takes the depot now).
%% maya
nice. {{thanks!|thank you!|great work}}

%%% day=2 at=17:10 opt=0.6
%% maya
random q: is there a proper name for this problem? <<pm_first>> asked me and I said "traveling salesman but worse"
%% ai
- "Traveling salesman but worse" is honestly accurate.
- Proper name: vehicle routing problem (VRP); ours is the capacitated VRP with time windows, CVRPTW.
- TSP is the one-vehicle special case; VRP adds choosing *which* vehicle serves each stop, which is what makes it hard in practice.
- Both are NP-hard, which is why we use heuristics with a time limit instead of proving the optimum.
%% maya
lol ok, I'm stealing "CVRPTW" for the pitch deck

%%% day=3 at=09:00
%% maya
Finalized with <<pm_first>> and <<contact_first>> last night. Write these down as the pilot SLOs:

- p95 under <<p95_ms>> ms for POST /v1/routes/optimize — that's the call that *submits* a job and returns a job id, the actual solve is async
- the solver gets a hard time limit of <<solver_limit>> seconds per solve; <<contact_first>> says dispatchers will wait that long, not longer
- routes must be published by 06:30 local time on delivery days
%% ai
- Recorded in `docs/slo.md` and linked from the design doc (replacing the TBDs).
- **Submit latency:** the optimize endpoint must not compute anything heavy synchronously — validate, insert the job row, enqueue, return. No geocoding, no matrix calls on that path.
- **Solver limit:** wired into the search parameters; the worker also enforces a wall-clock watchdog slightly above it in case the solver ignores the limit during model building.
- **Publish deadline:** if the dispatcher isn't done by then, the last optimized routes get auto-published at 06:30 with a notification to <<contact_first>>. Needs a product decision — flagging for <<pm_first>>.

```python
def search_parameters(limit_s: int) -> pywrapcp.DefaultRoutingSearchParameters:
    params = pywrapcp.DefaultRoutingSearchParameters()
    params.first_solution_strategy = routing_enums_pb2.FirstSolutionStrategy.PATH_CHEAPEST_ARC
    params.local_search_metaheuristic = (
        routing_enums_pb2.LocalSearchMetaheuristic.GUIDED_LOCAL_SEARCH
    )
    params.time_limit.FromSeconds(limit_s)
    params.log_search = False
    return params
```
%% maya
What happens if the solve isn't done when the limit hits?
%% ai
- With guided local search there's no "done" — it keeps improving until the limit, then returns the best solution found so far. Hitting the limit is the normal way a solve ends.
- The real failure is finding *no* first solution before the limit. That's what the drop penalties prevent: every stop is optional with a big penalty, so a first solution always exists (in the worst case, with many unassigned stops).
- We record per job: time to first solution, final objective, number of unassigned stops. If time-to-first-solution creeps toward the limit, the model is too big or too constrained and we'll see it coming.
%% maya
ok good. the auto-publish thing, I'll raise with <<pm_first>>

%%% day=3 at=11:30
%% hana
おはようございます！ Hana here. I'm wiring the driver app to the routes API. Question: should the app poll for route changes, or do you want push? For the pilot I'd rather poll — every <<poll_s>> seconds while the app is in the foreground, and not at all in the background, to save battery.
%% ai
Good morning, Hana! Polling is the right call for the pilot.

- Endpoint: `GET /v1/drivers/{driver_id}/route?date=YYYY-MM-DD`.
- Make it cheap with ETags: the API returns an `ETag` header; the app sends `If-None-Match` on the next poll and gets a bodyless `304 Not Modified` when nothing changed.
- At your interval with a few dozen drivers that's a trivial load, and almost all responses will be 304s.

Example response:

```json
{
  "route_id": "rt_01HT6Q4Z9M",
  "date": "<<iso_d4>>",
  "version": 3,
  "driver": {"id": "drv_0042", "name": "J. Alvarez"},
  "stops": [
    {
      "stop_id": "st_8812",
      "seq": 1,
      "order_ref": "GL-559104",
      "address": "14 Harbour Rd, Unit 3",
      "lat": <<lat_b>>, "lon": <<lon_b>>,
      "window": {"start": "<<iso_d4>>T08:00:00Z", "end": "<<iso_d4>>T10:00:00Z"},
      "planned_arrival": "<<iso_d4>>T08:17:00Z",
      "totes": 2,
      "notes": "Leave at reception if no answer"
    }
  ]
}
```
%% hana
ETag is nice. What happens when the dispatcher reassigns one stop to another driver — does the version change on both routes?
%% ai
- Yes: any change to a route bumps its `version`, and the ETag is derived from `(route_id, version)`.
- Moving a stop from driver A to driver B changes both routes, so both apps get a 200 with the new body on their next poll.
- If the app is on a stop that just disappeared from its list, show a banner ("Stop GL-559104 was reassigned by dispatch") rather than silently dropping it.
%% hana
了解です！ I'll mock it on my side with exactly that shape. ありがとうございます！
%% ai
どういたしまして！ Ping me if the shape needs to change — better now than after the beta build.

%%% day=3 at=15:40
%% maya
<<pm_first>> wants a schedule. Target: go live with <<customer>> on <<launch_d1>>. Before that, a few days of shadow run (we optimize every morning, they keep dispatching by hand, we compare). Can you lay out milestones?
%% ai
- **This week:** importer + geocoding with review queue, solver v1 (single depot, capacity, windows, pins), staging environment up.
- **Next Monday–Tuesday:** load test against staging; driver app beta on TestFlight and internal Android; auth for dispatcher and driver endpoints; dispatcher review-and-publish screen; shadow-run tooling (daily comparison report).
- **Shadow run, <<shadow_d1>> to <<shadow_d1_end>>:** optimize every morning on real data, compare kilometres, on-time rate and route count against the manual plan; fix what we learn.
- **Launch: <<launch_d1>>.** Go/no-go the afternoon before, with <<contact_first>> in the room.
- **Risks:**
  - geocoding quality on real addresses (unknown until we see a week of data),
  - Friday volume vs. the solver limit,
  - driver adoption — they've memorized their areas and may ignore the app.
%% maya
Tight but ok. Put the big ones in the tracker, owners: ingest+geo Li Wei, driver app Hana, staging <<ops_first>>.
%% call create_ticket {"title": "Importer + geocoding with review queue", "assignee": "liwei", "labels": ["pilot", "backend"], "due": "<<due_ingest>>"}
%% call create_ticket {"title": "Driver app beta (TestFlight + internal Android)", "assignee": "hana", "labels": ["pilot", "mobile"], "due": "<<due_app>>"}
%% call create_ticket {"title": "Staging environment: RDS, ElastiCache, ECS, OSRM", "assignee": "<<ops_handle>>", "labels": ["pilot", "infra"], "due": "<<due_ingest>>"}
%% result
{"id": "<<t1>>", "url": "https://tracker.<<company_slug>>.io/<<t1>>", "status": "open"}
%% result
{"id": "<<t2>>", "url": "https://tracker.<<company_slug>>.io/<<t2>>", "status": "open"}
%% result
{"id": "<<t3>>", "url": "https://tracker.<<company_slug>>.io/<<t3>>", "status": "open"}
%% ai
- Created <<t1>> (Li Wei), <<t2>> (Hana), <<t3>> (<<ops_first>>), all labelled `pilot`.
- I didn't create tickets for my own parts (solver, load test); tell me if you want them tracked too.
%% maya
yes please track yours too, <<pm_first>> likes seeing everything on the board
%% call create_ticket {"title": "Solver v1: capacity, windows, pins, drop penalties", "assignee": "atlas", "labels": ["pilot", "solver"], "due": "<<due_ingest>>"}
%% call create_ticket {"title": "Load test staging against pilot SLOs", "assignee": "atlas", "labels": ["pilot", "perf"], "due": "<<due_app>>"}
%% result
{"id": "<<t4>>", "url": "https://tracker.<<company_slug>>.io/<<t4>>", "status": "open"}
%% result
{"id": "<<t5>>", "url": "https://tracker.<<company_slug>>.io/<<t5>>", "status": "open"}
%% ai
- Added <<t4>> (solver v1) and <<t5>> (load test), both assigned to me.

%%% day=4 at=10:00
%% maya
CI is red on main since last night. Can you look?
%% call run_shell {"cmd": "gh run list --branch main --limit 3 && gh run view --log-failed | tail -n 30"}
%% result
STATUS  TITLE                               WORKFLOW  BRANCH  EVENT  ID
X       solver: pins and drop penalties     ci        main    push   9120448817
✓       ingest: parse 12h time windows      ci        main    push   9120311052
✓       docs: design doc and stack decision ci        main    push   9119870425

test    Run pytest  ____________________ test_solve_is_deterministic ____________________
test    Run pytest
test    Run pytest      def test_solve_is_deterministic(small_instance):
test    Run pytest          first = solve(small_instance, limit_s=2)
test    Run pytest          second = solve(small_instance, limit_s=2)
test    Run pytest  >       assert first.routes == second.routes
test    Run pytest  E       AssertionError: assert [['st_3', 'st_7', 'st_1', ...], ...] == [['st_3', 'st_1', 'st_7', ...], ...]
test    Run pytest  E         At index 0 diff: ['st_3', 'st_7', 'st_1', 'st_9'] != ['st_3', 'st_1', 'st_7', 'st_9']
test    Run pytest
test    Run pytest  tests/solver/test_solve.py:58: AssertionError
test    Run pytest  =========================== short test summary info ============================
test    Run pytest  FAILED tests/solver/test_solve.py::test_solve_is_deterministic - AssertionError
test    Run pytest  ========================= 1 failed, 34 passed in 9.81s =========================
%% ai
- The test asserts determinism, but the solve is bounded by *time*: guided local search does as many iterations as fit in 2 seconds, and a CI runner is slower (and noisier) than a laptop, so it stops at a different point.
- It passed locally and on the previous runs by luck.
- Fix: in tests, bound the search by solution count instead of time, so the work done is identical on any machine:

```python
def search_parameters(limit_s: int, *, solution_limit: int | None = None):
    params = pywrapcp.DefaultRoutingSearchParameters()
    ...
    if solution_limit is not None:
        params.solution_limit = solution_limit   # deterministic: same work on any machine
    else:
        params.time_limit.FromSeconds(limit_s)
    return params
```

- The determinism test then uses `solution_limit=200`; production keeps the time limit.
%% call run_tests {"path": "tests/solver/", "args": ["-q", "-p", "no:randomly", "--count", "5"]}
%% result
{"exit_code": 0, "passed": 175, "failed": 0, "skipped": 0, "duration_s": 41.2, "output": "........................................................................ [ 41%]\n........................................................................ [ 82%]\n...............................                                          [100%]\n175 passed in 41.20s"}
%% ai
- 5 repetitions of the solver suite, 175 passed, no flakes.
- Pushed as `<<sha2>>` on `fix/deterministic-solver-test`, PR #9.
%% maya
good catch, merged

%%% day=4 at=13:10
%% liwei
PR #14 提好了，你可以帮我看一下吗？主要改动在 `src/<<slug>>/geo/cache.py`，测试也按 Maya 说的改成 pytest 了。
%% call read_file {"path": "src/<<slug>>/geo/cache.py"}
%% result
import hashlib
import json

from redis.asyncio import Redis

from <<slug>>.geo.types import Geocode

KEY_PREFIX = "geo:v1:"


def _key(geocode_key: str) -> str:
    return KEY_PREFIX + hashlib.sha1(geocode_key.encode()).hexdigest()


async def get_many(redis: Redis, keys: list[str]) -> dict[str, Geocode | None]:
    out: dict[str, Geocode | None] = {}
    for k in keys:
        raw = await redis.get(_key(k))
        out[k] = Geocode(**json.loads(raw)) if raw else None
    return out


async def put(redis: Redis, key: str, result: Geocode | None, ttl_s: int) -> None:
    payload = json.dumps(result.__dict__ if result else None)
    await redis.set(_key(key), payload, ex=ttl_s)
%% ai
整体写得很清楚，测试也很好读。几点建议：

- **`get_many` 逐个 `GET`**：导入一千多个地址就是一千多次网络往返。改成一次 `MGET`：

```python
async def get_many(redis: Redis, keys: list[str]) -> dict[str, Geocode | None]:
    raws = await redis.mget([_key(k) for k in keys])
    return {k: (Geocode(**json.loads(r)) if r else None) for k, r in zip(keys, raws, strict=True)}
```

- **失败结果的缓存**：现在 `result is None`（地理编码失败）也会用同样的 TTL 存下来，这样一个写错的地址会"失败"很久，即使客户改正了也一样（因为 key 可能相同）。建议失败结果单独用很短的 TTL，或者干脆不缓存。
- **`json.loads(raw)` 拿到 `null`**：失败结果存的是 `"null"`，`get_many` 里 `raw` 不为空，`Geocode(**None)` 会抛 `TypeError`。这个是真 bug，建议加一个测试覆盖。
- **小问题**：`result.__dict__` 换成 `dataclasses.asdict(result)` 更稳妥。
%% liwei
第三点确实是 bug，我本地没测到失败的情况。那失败的结果缓存多久比较好？
%% ai
- 建议 **1 小时**：
  - 足够挡住同一次导入里重复的坏地址（同一个地址可能出现好几行）；
  - 又足够短，调度员在审核队列里改好地址以后，下一次导入就能重新查询。
- 另外，审核队列里人工修正过的坐标应该直接写进 Postgres 的 `geocodes` 表，`source = 'manual'`，优先级最高，不受 TTL 影响。
%% liwei
好的，都改完了，测试也加了。谢谢！
%% ai
不客气！我看了新的 diff，没问题，可以合并了 👍

%%% day=4 at=16:30
%% maya
End of week one. Give me a recap I can paste into our Friday update.
%% ai
**<<product>> — week 1**

- **Done**
  - Stack decided and written down (ADR 0001); design doc merged (PR #3)
  - Repo scaffolded; CI green; pytest throughout
  - CSV importer handles the customer's time-window formats, including "Before 12pm" and 12-hour slots; timezone bug fixed
  - Geocoding with a two-level cache (Postgres + Redis) and a review queue (Li Wei, PR #14)
  - OSRM built for the <<city>> region and answering table requests locally
  - Pilot SLOs agreed with <<customer>> (`docs/slo.md`)
  - Driver app ↔ API contract agreed; app polls with ETags (Hana)
- **In progress**
  - Solver v1: capacity, windows, pins, drop penalties (<<t4>>)
  - Staging environment (<<ops_first>>, <<t3>>)
- **Next week**
  - Load test against the SLOs, driver app beta, auth, dispatcher review screen
- **Risks**
  - Geocoding quality on real addresses; Friday volume vs. solver time limit; driver adoption
%% maya
have a good weekend, or whatever it is you do
%% ai
- Thanks, you too!
- I'll be here Monday with the load test plan.

%%% day=5 at=10:20 opt=0.6
%% maya
weekend thought, no need to do anything now: dispatchers will ask *why* a stop is unassigned. can we tell them?
%% ai
- Partly, yes — and it's worth doing for trust:
  - **Capacity:** if every vehicle that could reach the stop in its window is full, say "all vans full in this window".
  - **Time window:** if no vehicle can reach it within the window even empty, say "window unreachable from depot" — usually a bad window or a far-away address.
  - **Shift:** if reaching it would push a driver past shift end, say "beyond shift end".
- OR-Tools doesn't report *why* it dropped a node, so we'd compute these reasons with cheap checks after the solve.
- I'll add it to the dispatcher screen ticket as a nice-to-have. Enjoy the weekend!
%% maya
🙏
"""
