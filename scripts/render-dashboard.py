#!/usr/bin/env python3
"""Renders the Grafana dashboard's panels from a real run, without Grafana.

Input: the directory written by `tests/prometheus_integration.py --save DIR` (every dashboard
query's query_range result from a real Prometheus server that scraped `stragglar run`). Output: a
PNG with one plot per panel, laid out like the dashboard (its gridPos), for docs/monitoring.md.
Needs matplotlib (Debian: python3-matplotlib; run it with /usr/bin/python3).

usage: scripts/render-dashboard.py DIR OUT.png
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def panels(items):
    for panel in items:
        if panel.get("type") != "row":
            yield panel
        yield from panels(panel.get("panels", []))


def series_name(metric):
    parts = [metric.get("comm", "")]
    if "rank" in metric:
        parts.append(f"rank {metric['rank']}")
    parts += [metric[k] for k in ("algorithm", "size_bucket") if k in metric]
    if "le" in metric:
        parts.append(f"le {metric['le']}")
    return " ".join(p for p in parts if p) or "value"


def sort_key(name):
    # Numbers sort as numbers: rank 10 after rank 9, le 0.01 after le 0.005.
    key = []
    for word in name.split():
        try:
            key.append((0, float(word), ""))
        except ValueError:
            key.append((1, 0.0, word))
    return key


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    with open(os.path.join(sys.argv[1], "panels.json")) as f:
        saved = json.load(f)
    with open(os.path.join(ROOT, "dashboards", "stragglar-dashboard.json")) as f:
        dashboard = json.load(f)
    results = {}
    for entry in saved["panels"]:
        results.setdefault(entry["title"], []).append(entry)
    start = saved["start"]
    layout = list(panels(dashboard["panels"]))
    bottom = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in layout)
    top = min(p["gridPos"]["y"] for p in layout)
    figure = plt.figure(figsize=(20, (bottom - top) * 0.42))
    figure.suptitle(f"{dashboard['title']}: `stragglar run`, 8 ranks, rank 5 ~20 ms late "
                    "(scraped by Prometheus every 1 s)", fontsize=14)
    for panel in layout:
        grid = panel["gridPos"]
        # Grafana's grid: 24 columns; rows of ~30 px. Leave room for titles.
        axes = figure.add_axes([grid["x"] / 24 + 0.03, 1 - (grid["y"] - top + grid["h"]) /
                                (bottom - top) * 0.95 + 0.012, grid["w"] / 24 - 0.05,
                                grid["h"] / (bottom - top) * 0.95 - 0.045])
        axes.set_title(f"{panel['title']}  [{panel['type']}]", fontsize=10, loc="left")
        entries = results.get(panel["title"], [])
        lines = [(series_name(s["metric"]) + ("" if len(entries) == 1 else f" (q{i + 1})"),
                  [(float(t) - start, float(v)) for t, v in s["values"] if v not in ("NaN",)])
                 for i, entry in enumerate(entries) for s in entry["result"]]
        lines = [(name, points) for name, points in lines if points]
        if panel["type"] == "stat":
            text = "\n".join(f"{name}: {points[-1][1]:.4g}" for name, points in lines[:6])
            axes.text(0.02, 0.5, text or "no data", fontsize=10, va="center", family="monospace")
            axes.set_axis_off()
            continue
        if panel["type"] in ("heatmap", "state-timeline") and lines:
            lines.sort(key=lambda item: sort_key(item[0]))
            times = sorted({t for _, points in lines for t, _ in points})
            index = {t: i for i, t in enumerate(times)}
            grid_values = [[float("nan")] * len(times) for _ in lines]
            for row, (_, points) in enumerate(lines):
                for t, v in points:
                    grid_values[row][index[t]] = v
            if panel["type"] == "heatmap":
                # Prometheus buckets are cumulative (le); Grafana's heatmap shows each bucket's own
                # count, so subtract the bucket below.
                for row in range(len(lines) - 1, 0, -1):
                    grid_values[row] = [a - b for a, b in zip(grid_values[row],
                                                              grid_values[row - 1])]
            image = axes.imshow(grid_values, aspect="auto", interpolation="nearest",
                                extent=[times[0], times[-1], len(lines) - 0.5, -0.5], cmap="inferno")
            axes.set_yticks(range(len(lines)))
            axes.set_yticklabels([name[:40] for name, _ in lines], fontsize=6)
            figure.colorbar(image, ax=axes, pad=0.01)
            continue
        for name, points in lines:
            axes.plot([t for t, _ in points], [v for _, v in points], label=name[:48], lw=1)
        if lines and len(lines) <= 16:
            axes.legend(fontsize=6, ncol=2, loc="upper left")
        axes.set_xlabel("seconds since the run started", fontsize=7)
        axes.tick_params(labelsize=7)
    figure.savefig(sys.argv[2], dpi=70)
    print(f"wrote {sys.argv[2]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
