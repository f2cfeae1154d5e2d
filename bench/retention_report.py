"""Aggregating, checking and printing the retention benchmark's records (see
``bench/retention.py``): per system and budget, overall, per question category and per
chat; the plain-text tables, the compact per-category table, and the plot."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "BASELINES",
    "EVIDENCE",
    "FULL",
    "METRICS",
    "UNBUDGETED",
    "aggregate",
    "beats",
    "compact",
    "four_sets",
    "plot",
    "report",
    "target_check",
]

BASELINES = ("recent", "bm25", "vector", "hybrid", "fts", "semantic")
FULL = "full"
EVIDENCE = "evidence"  # the reference context of the evidence messages alone
UNBUDGETED = "unbudgeted"
METRICS = ("evidence_hit", "evidence_full", "answer_recall", "memory_recall", "gold_recall")
TARGET_BUDGET = 4096
TARGET_RATIO = 0.95
# what the compact table shows, and what lossless must beat the rival on (a set may name
# its own in config["compact_metrics"])
COMPACT_METRICS = (("answer_recall", "ans"), ("evidence_full", "ev"))
SHORT = {"answer_recall": "ans", "evidence_full": "ev", "evidence_hit": "hit", "memory_recall": "mem",
         "gold_recall": "gold"}
RIVAL = "hybrid"
# the rows of the one table over the sets: systems first, then the references
ROW_ORDER = ("lossless", "lossless-kw", "lossless-wb", "recent", "bm25", "vector", "hybrid", "fts", "semantic",
             EVIDENCE, FULL)


def percentile(values: Sequence[float], p: float) -> float:
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


def aggregate(records: Sequence[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """{system: {budget: {metric: mean, ms_p50, ms_p99, tokens, questions, tier_tokens}}}."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        groups[(r["system"], str(r["budget"]))].append(r)
    out: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for (system, budget), rows in groups.items():
        cell: dict[str, Any] = {"questions": len(rows)}
        for metric in METRICS:
            vals = [r[metric] for r in rows if r.get(metric) is not None]
            cell[metric] = round(statistics.fmean(vals), 4) if vals else None
        ms = [r["ms"] for r in rows]
        cell["ms_p50"] = round(percentile(ms, 50), 2)
        cell["ms_p99"] = round(percentile(ms, 99), 2)
        cell["tokens"] = round(statistics.fmean(r["tokens"] for r in rows), 1)
        tiered = [r["tiers"] for r in rows if "tiers" in r]
        if tiered:
            names = sorted({k for t in tiered for k in t})
            cell["tier_tokens"] = {k: round(statistics.fmean(t.get(k, 0) for t in tiered), 1) for k in names}
        out[system][budget] = cell
    return {s: dict(sorted(v.items(), key=lambda kv: _budget_key(kv[0]))) for s, v in out.items()}


def _budget_key(budget: str) -> float:
    return float("inf") if budget == UNBUDGETED else float(budget)


def target_check(overall: dict[str, dict[str, dict[str, Any]]], systems: Sequence[str],
                 budgets: Sequence[int], metrics: Sequence[str] = ("evidence_hit", "answer_recall")
                 ) -> dict[str, Any]:
    at = TARGET_BUDGET if TARGET_BUDGET in budgets else max(budgets)
    ours = overall["lossless"][str(at)]["answer_recall"]
    full = overall[FULL][UNBUDGETED]["answer_recall"]
    ratio = round(ours / full, 4) if ours is not None and full else None
    losses = []
    for budget in budgets:
        for base in (s for s in systems if s in BASELINES):
            for metric in metrics:
                a = overall["lossless"][str(budget)][metric]
                b = overall[base][str(budget)][metric]
                if a is None or b is None or not a > b:
                    losses.append({"budget": budget, "baseline": base, "metric": metric, "lossless": a, base: b})
    evidence = overall.get(EVIDENCE, {}).get(str(at), {}).get("answer_recall")
    return {"budget": at, "lossless_answer_recall": ours, "full_answer_recall": full, "ratio": ratio,
            "evidence_answer_recall": evidence,
            "evidence_ratio": round(evidence / full, 4) if evidence is not None and full else None,
            "ratio_goal": TARGET_RATIO, "ratio_met": ratio is not None and ratio >= TARGET_RATIO, "metrics": list(metrics),
            "beats_every_baseline": not losses, "losses": losses}


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 10 else f"{value:.1f}"
    return str(value)


def table(title: str, rows: dict[str, list[Any]], columns: Sequence[str]) -> str:
    """A plain-text table: one row per name, one column per budget (or system)."""
    first = max(len(title), *(len(name) for name in rows))
    width = max(9, *(len(c) for c in columns))
    head = f"{title:<{first}}" + "".join(f"{c:>{width + 1}}" for c in columns)
    lines = [head, "-" * len(head)]
    for name, cells in rows.items():
        lines.append(f"{name:<{first}}" + "".join(f"{_fmt(c):>{width + 1}}" for c in cells))
    return "\n".join(lines)


def report(result: dict[str, Any]) -> str:
    overall = result["overall"]
    systems = [*result["config"]["systems"], EVIDENCE, FULL]
    budgets = [str(b) for b in result["config"]["budgets"]]
    columns = [*budgets, UNBUDGETED]
    parts = []
    for metric in (*METRICS, "tokens", "ms_p50", "ms_p99"):
        rows = {s: [overall.get(s, {}).get(b, {}).get(metric) for b in columns] for s in systems}
        if any(v is not None for cells in rows.values() for v in cells):
            parts.append(table(metric, rows, columns))
    tiers = sorted({k for b in budgets for k in overall.get("lossless", {}).get(b, {}).get("tier_tokens", {})})
    if tiers:
        rows = {t: [overall["lossless"][b].get("tier_tokens", {}).get(t, 0.0) for b in budgets] for t in tiers}
        parts.append(table("lossless tier tokens", rows, budgets))
    target = result["target"]
    at = str(target["budget"])
    for metric in target.get("metrics", ("evidence_hit", "answer_recall")):
        rows = {ab: [cells.get(s, {}).get(at if s != FULL else UNBUDGETED, {}).get(metric) for s in systems]
                for ab, cells in result["by_ability"].items()}
        if any(v is not None for cells in rows.values() for v in cells):
            parts.append(table(f"{metric}@{at}", rows, systems))
    lines = [
        f"target: lossless answer_recall@{at} / full = {_fmt(target['lossless_answer_recall'])} / "
        f"{_fmt(target['full_answer_recall'])} = {_fmt(target['ratio'])} "
        f"(goal >= {TARGET_RATIO}: {'met' if target['ratio_met'] else 'NOT met'})",
        f"reference: the evidence messages alone, answer_recall@{at} / full = "
        f"{_fmt(target['evidence_answer_recall'])} / {_fmt(target['full_answer_recall'])} = "
        f"{_fmt(target['evidence_ratio'])}",
        f"lossless beats every baseline at every budget on {' and '.join(target.get('metrics', ()))}: "
        + ("yes" if target["beats_every_baseline"] else "no"),
    ]
    lines += [f"  not better: {x['metric']}@{x['budget']} vs {x['baseline']}: lossless {_fmt(x['lossless'])} "
              f"<= {_fmt(x[x['baseline']])}" for x in target["losses"]]
    parts.append("\n".join(lines))
    return "\n\n".join(parts)


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    overall = result["overall"]
    budgets = result["config"]["budgets"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    styles = {"lossless": ("C0", "o"), "recent": ("C1", "s"), "bm25": ("C2", "^"), "vector": ("C3", "D"),
              "hybrid": ("C5", "v"), "fts": ("C6", "<"), "semantic": ("C8", ">"), "lossless-wb": ("C9", "P"),
              EVIDENCE: ("C7", "x")}
    for ax, metric in zip(axes, ("answer_recall", "evidence_hit"), strict=True):
        for system in [*result["config"]["systems"], *([EVIDENCE] if metric == "answer_recall" else [])]:
            ys = [overall[system][str(b)][metric] for b in budgets]
            color, marker = styles.get(system, ("C4", "x"))
            ax.plot(budgets, ys, marker=marker, color=color, label=system,
                    linestyle=":" if system == EVIDENCE else "-")
        full = overall[FULL][UNBUDGETED][metric]
        if full is not None:
            ax.axhline(full, linestyle="--", color="grey", label="full (unbudgeted)")
        ax.set_xscale("log", base=2)
        ax.set_xticks(budgets, [str(b) for b in budgets])
        ax.set_xlabel("budget (tokens)")
        ax.set_ylabel(metric)
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
        ax.set_title(metric)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=9, frameon=False)
    n = result["config"]["questions"]
    fig.suptitle(f"{result['config']['set']} retention: {len(result['config']['chats'])} chats, {n} questions, "
                 f"window {result['config']['window']}" + ("" if "vector" in result["config"]["systems"] else
                                                           " (no vectors)"))
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)


def compact_metrics(result: dict[str, Any]) -> list[tuple[str, str]]:
    """(metric, short name) of the compact table: the set's own, else answer and evidence."""
    named = result["config"].get("compact_metrics")
    return [(m, SHORT.get(m, m)) for m in named] if named else list(COMPACT_METRICS)


def beats(result: dict[str, Any], rival: str = RIVAL, system: str = "lossless") -> dict[str, Any]:
    """Where ``system`` is not strictly better than ``rival``, on the compact metrics at
    every budget: overall and per category."""
    budgets = [str(b) for b in result["config"]["budgets"]]
    groups = {"all": result["overall"], **result["by_ability"]}
    metrics = compact_metrics(result)
    out: dict[str, Any] = {"system": system, "rival": rival, "metrics": [m for m, _ in metrics],
                           "losses": {}}
    if rival not in result["overall"]:
        out["available"] = False
        return out
    for name, cells in groups.items():
        losses = []
        for metric, _ in metrics:
            for b in budgets:
                a = cells.get(system, {}).get(b, {}).get(metric)
                r = cells.get(rival, {}).get(b, {}).get(metric)
                if a is None or r is None or not a > r:
                    losses.append({"metric": metric, "budget": int(b), system: a, rival: r})
        out["losses"][name] = losses
    out["available"] = True
    out["overall"] = not out["losses"]["all"]
    return out


def compact(result: dict[str, Any]) -> str:
    """Rows = systems, columns = answer_recall then evidence_full at each budget; one
    block for all questions and one per category; then the verdict against the rival."""
    systems = [*result["config"]["systems"], EVIDENCE]
    budgets = [str(b) for b in result["config"]["budgets"]]
    metrics = compact_metrics(result)
    columns = [f"{short}@{b}" for _, short in metrics for b in budgets]
    groups = {"all": result["overall"], **result["by_ability"]}
    parts = []
    for name, cells in groups.items():
        n = cells.get("lossless", {}).get(budgets[0], {}).get("questions", 0)
        rows = {s: [cells.get(s, {}).get(b, {}).get(m) for m, _ in metrics for b in budgets]
                for s in systems if s in cells}
        parts.append(table(f"{name} ({n} q)", rows, columns))
    verdict = result.get("versus") or beats(result)
    if not verdict.get("available"):
        parts.append(f"(no {verdict['rival']} baseline in this run: run with vectors to compare)")
        return "\n\n".join(parts)
    lines = [f"{verdict['system']} beats {verdict['rival']} at every budget on {' and '.join(verdict['metrics'])} "
             f"(all questions): {'yes' if verdict['overall'] else 'no'}"]
    for name, losses in verdict["losses"].items():
        if losses:
            cells = ", ".join(f"{x['metric'].split('_')[0]}@{x['budget']} {_fmt(x[verdict['system']])}"
                              f"<={_fmt(x[verdict['rival']])}" for x in losses)
            lines.append(f"  {name}: not better at {cells}")
    parts.append("\n".join(lines))
    return "\n\n".join(parts)


def four_sets(results: dict[str, dict[str, Any]], markdown: bool = False) -> str:
    """One table over the sets: rows = systems (then the references), columns = set and
    budget, each set's own metric named in its columns (``config["headline"]``); the
    unbudgeted ``full`` row repeats its one value under every budget of its set."""
    columns: list[tuple[str, str, str]] = []  # (set, budget, metric)
    for name, result in results.items():
        metric = result["config"]["headline"]
        columns += [(name, str(b), metric) for b in result["config"]["budgets"]]
    present = {s for r in results.values() for s in r["overall"]}
    systems = [s for s in ROW_ORDER if s in present] + sorted(present - set(ROW_ORDER))
    rows: dict[str, list[Any]] = {}
    for system in systems:
        cells = []
        for name, budget, metric in columns:
            overall = results[name]["overall"].get(system, {})
            cells.append(overall.get(UNBUDGETED if system == FULL else budget, {}).get(metric))
        rows[system] = cells
    heads = [f"{name} {SHORT.get(metric, metric)}@{budget}" for name, budget, metric in columns]
    if not markdown:
        return table("system", rows, heads)
    lines = ["| system | " + " | ".join(heads) + " |", "|---" * (len(heads) + 1) + "|"]
    lines += [f"| {system} | " + " | ".join(_fmt(c) for c in cells) + " |" for system, cells in rows.items()]
    return "\n".join(lines)
