#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""docs/performance.svg and the figures of docs/performance.md, from the CSVs of
`infiniop-bench --sweep... --csv` and `bench/compare_torch.py --sweep-max ... --csv`.

    python3 bench/plot_performance.py --infiniop docs/performance/infiniop.csv \\
        --torch docs/performance/torch.csv --svg docs/performance.svg [--table]
    python3 bench/plot_performance.py ... --check docs/performance.svg   (ctest docs.performance)

Each input may hold several runs (an optional leading `run` column, or simply rows repeated):
every figure is the best of them, the shared machine's noise only ever slowing a run. Per
operator, dtype, size and thread count: the best GB/s of infiniop's rows and of torch's; per
dtype, size and thread count, the best of the streaming (non-temporal) copy and of glibc's
memcpy timed beside the operators in the same runs, plotted as the memory roofline. The SVG has a panel per
(thread count, dtype): GB/s (log scale) against output elements (log scale), infiniop solid,
PyTorch dashed, the copies in grey. Only the standard library: the SVG is written by hand.
--table [THREADS...] prints the Markdown rows of docs/performance.md's tables (--table-sizes
picks sizes, e.g. 256K 16M); --compare prints every row of infiniop against PyTorch eager and
torch.compile (Inductor: compare_torch.py's rows of mode inductor, plotted dash-dot), with each
row's ratio to its own NT copy (the table of docs/performance.md's "Against PyTorch 2").
--check regenerates the SVG in memory, checks that it parses as XML and that the given file is
identical to it.
"""
import argparse
import csv
import math
import sys
import xml.etree.ElementTree as ElementTree

COLORS = {"swiglu": "#1f77b4", "gelu_backward": "#d62728", "moe_finalize_routing": "#2ca02c"}
EXTRA_COLORS = ["#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#ff7f0e"]
TORCH_NAME = {"gelu_backward(out=)": "gelu_backward"}  # the form that writes into a given output
INDUCTOR_DASH = "8,3,2,3"
PANEL_W, PANEL_H = 430, 300
MARGIN_L, MARGIN_R, MARGIN_T, MARGIN_B = 58, 14, 30, 44


def read_rows(paths):
    rows = []
    for path in paths:
        with open(path, newline="", encoding="utf-8") as handle:
            rows += [row for row in csv.DictReader(handle) if row.get("op") != "op"]
    return rows


def number(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def best(table, key, value):
    if value is not None and (key not in table or value > table[key]):
        table[key] = value


def collect(infiniop_rows, torch_rows):
    """{(threads, dtype): {series: {elements: GB/s}}}, series 'op', 'torch op', 'NT copy' and
    'memcpy' (the best copy beside any of the panel's rows at that size); and
    {(threads, dtype, op, elements): the best of each column} for the tables."""
    series, facts = {}, {}
    for row in infiniop_rows:
        if row.get("check") in ("FAIL", "ERROR") or row.get("device", "cpu") != "cpu":
            continue
        threads, dtype, op = int(row["threads"]), row["dtype"], row["op"]
        elements = int(row["elements"])
        panel = series.setdefault((threads, dtype), {})
        best(panel.setdefault(op, {}), elements, number(row["gb_s"]))
        # the copies timed beside every operator row of the panel: the best at each size
        for name, column in (("NT copy", "nt_gb_s"), ("memcpy", "copy_gb_s")):
            best(panel.setdefault(name, {}), elements, number(row[column]))
        fact = facts.setdefault((threads, dtype, op, elements), {})
        for column in ("gb_s", "gelem_s", "nt_gb_s", "copy_gb_s"):
            best(fact, column, number(row[column]))
        fact["bytes_per_element"] = int(row["bytes"]) / elements
        fact["shape"] = row["shape"]
    for row in torch_rows:
        inductor = row.get("mode") == "inductor"  # no mode column: eager (PyTorch 1.x's CSVs)
        if row["op"] == "gelu_backward" and not inductor:
            continue  # the allocating form; eager's gelu_backward(out=) is the one compared
        op = TORCH_NAME.get(row["op"], row["op"])
        threads, dtype, elements = int(row["threads"]), row["dtype"], int(row["elements"])
        prefix = "inductor " if inductor else "torch "
        best(series.setdefault((threads, dtype), {}).setdefault(prefix + op, {}), elements,
             number(row["gb_s"]))
        best(facts.setdefault((threads, dtype, op, elements), {}),
             "inductor_gb_s" if inductor else "torch_gb_s", number(row["gb_s"]))
    return series, facts


def parse_count(text):
    """N, NK (N x 1024) or NM (N x 2^20), as infiniop-bench --sweep-max reads it."""
    scale = {"K": 1 << 10, "M": 1 << 20}.get(text[-1:].upper(), 1)
    return int(text[:-1] if scale > 1 else text) * scale


def size_label(n):
    for unit, scale in (("M", 1 << 20), ("K", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{unit}"
    return str(n)


def nice_ticks(low, high):
    ticks, decade = [], 10 ** math.floor(math.log10(low))
    while decade <= high * 10:
        for step in (1, 2, 5):
            if low <= step * decade <= high:
                ticks.append(step * decade)
        decade *= 10
    return ticks


def steps_around(value):
    """1, 2, 5 x 10^k in the decades next to value."""
    decade = 10 ** math.floor(math.log10(value))
    return [step * decade * scale for scale in (0.1, 1, 10) for step in (1, 2, 5)]


def color_of(op, extra):
    if op not in COLORS:
        COLORS[op] = extra[len(COLORS) % len(extra)]
    return COLORS[op]


def svg_text(series, title):
    panels = sorted(series, key=lambda p: (-p[0], {"f32": 0, "f16": 1, "bf16": 2}.get(p[1], 3)))
    columns = max(1, len({p[1] for p in panels}))
    rows_n = math.ceil(len(panels) / columns)
    ops = sorted({name for panel in series.values() for name in panel
                  if name not in ("NT copy", "memcpy")
                  and not name.startswith(("torch ", "inductor "))},
                 key=lambda o: (o not in COLORS, o))
    legend_h = 22 * (1 + math.ceil((len(ops) + 2) / 4))
    width, height = columns * PANEL_W, 28 + legend_h + rows_n * PANEL_H
    values = [v for panel in series.values() for points in panel.values() for v in points.values()
              if v and v > 0]
    sizes = sorted({n for panel in series.values() for points in panel.values() for n in points})
    y_low = max(v for v in steps_around(min(values)) if v <= min(values))
    y_high = min(v for v in steps_around(max(values)) if v >= max(values))
    x_low, x_high = math.log2(sizes[0]), math.log2(sizes[-1])
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{width / 2:.0f}" y="18" text-anchor="middle" font-size="13" '
           f'font-weight="bold">{title}</text>']
    # legend: operators (colour), then the line styles
    items = [(op, color_of(op, EXTRA_COLORS), "", op) for op in ops]
    items += [("", "#000", "", "infiniop (solid)"), ("", "#000", "5,3", "PyTorch eager (dashed)")]
    if any(name.startswith("inductor ") for panel in series.values() for name in panel):
        items.append(("", "#000", INDUCTOR_DASH, "torch.compile, Inductor (dash-dot)"))
    items += [("", "#555", "2,2", "NT copy (the roofline out of cache)"),
              ("", "#aaa", "1,3", "glibc memcpy")]
    for i, (_, color, dash, label) in enumerate(items):
        x, y = 16 + (i % 4) * (width - 32) / 4, 40 + 20 * (i // 4)
        dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
        out.append(f'<line x1="{x:.0f}" y1="{y}" x2="{x + 26:.0f}" y2="{y}" stroke="{color}" '
                   f'stroke-width="2"{dash_attr}/>')
        out.append(f'<text x="{x + 32:.0f}" y="{y + 4}">{label}</text>')
    top = 28 + legend_h
    for index, key in enumerate(panels):
        threads, dtype = key
        ox, oy = (index % columns) * PANEL_W, top + (index // columns) * PANEL_H
        plot_w = PANEL_W - MARGIN_L - MARGIN_R
        plot_h = PANEL_H - MARGIN_T - MARGIN_B

        def px(n):
            span = (x_high - x_low) or 1
            return ox + MARGIN_L + (math.log2(n) - x_low) / span * plot_w

        def py(v):
            span = math.log10(y_high) - math.log10(y_low)
            return oy + MARGIN_T + plot_h - (math.log10(v) - math.log10(y_low)) / span * plot_h

        out.append(f'<text x="{ox + MARGIN_L + plot_w / 2:.0f}" y="{oy + 18}" '
                   f'text-anchor="middle" font-weight="bold">{dtype.upper()}, {threads} '
                   f'thread{"s" if threads != 1 else ""}</text>')
        out.append(f'<rect x="{ox + MARGIN_L}" y="{oy + MARGIN_T}" width="{plot_w}" '
                   f'height="{plot_h}" fill="none" stroke="#333"/>')
        for tick in nice_ticks(y_low, y_high):
            y = py(tick)
            out.append(f'<line x1="{ox + MARGIN_L}" y1="{y:.1f}" x2="{ox + MARGIN_L + plot_w}" '
                       f'y2="{y:.1f}" stroke="#e5e5e5"/>')
            out.append(f'<text x="{ox + MARGIN_L - 5}" y="{y + 4:.1f}" '
                       f'text-anchor="end">{tick:g}</text>')
        for n in sizes:
            x = px(n)
            out.append(f'<line x1="{x:.1f}" y1="{oy + MARGIN_T}" x2="{x:.1f}" '
                       f'y2="{oy + MARGIN_T + plot_h}" stroke="#f0f0f0"/>')
            out.append(f'<text x="{x:.1f}" y="{oy + MARGIN_T + plot_h + 15}" '
                       f'text-anchor="middle">{size_label(n)}</text>')
        out.append(f'<text x="{ox + MARGIN_L + plot_w / 2:.0f}" y="{oy + PANEL_H - 8}" '
                   f'text-anchor="middle">output elements</text>')
        out.append(f'<text transform="translate({ox + 14},{oy + MARGIN_T + plot_h / 2:.0f}) '
                   f'rotate(-90)" text-anchor="middle">GB/s (read + written)</text>')
        panel = series[key]
        styles = [(name, "#555", "2,2", 1.5) for name in ("NT copy",)]
        styles += [(name, "#aaa", "1,3", 1.5) for name in ("memcpy",)]
        for op in ops:
            styles.append((op, color_of(op, EXTRA_COLORS), "", 2))
            styles.append(("torch " + op, color_of(op, EXTRA_COLORS), "5,3", 1.5))
            styles.append(("inductor " + op, color_of(op, EXTRA_COLORS), INDUCTOR_DASH, 1.5))
        for name, color, dash, stroke in styles:
            points = sorted((n, v) for n, v in panel.get(name, {}).items() if v and v > 0)
            if not points:
                continue
            path = " ".join(f"{px(n):.1f},{py(v):.1f}" for n, v in points)
            dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
            out.append(f'<polyline points="{path}" fill="none" stroke="{color}" '
                       f'stroke-width="{stroke}"{dash_attr}><title>{name}</title></polyline>')
            if not dash:
                for n, v in points:
                    out.append(f'<circle cx="{px(n):.1f}" cy="{py(v):.1f}" r="2.5" '
                               f'fill="{color}"/>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def panel_nt(facts, threads, dtype, elements):
    """The best streaming copy beside any operator row of that thread count, dtype and size."""
    copies = [f["nt_gb_s"] for (t, d, _, n), f in facts.items()
              if (t, d, n) == (threads, dtype, elements) and f.get("nt_gb_s")]
    return max(copies) if copies else None


def table(facts, threads, sizes=None):
    """Markdown rows: op, dtype, size, GB/s, vs torch (eager; and Inductor where the CSVs have
    its rows), NT copy GB/s (the panel's best at that size), the ratio to it, Gelem/s."""
    inductor = any("inductor_gb_s" in fact for fact in facts.values())
    head = ["operator", "dtype", "output elements (shape)", "infiniop GB/s", "PyTorch GB/s",
            "infiniop / PyTorch"]
    head += ["Inductor GB/s", "infiniop / Inductor"] if inductor else []
    head += ["NT copy GB/s", "infiniop / NT copy", "Gelem/s"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (t, dtype, op, elements), fact in sorted(facts.items(),
                                                  key=lambda i: (i[0][2], i[0][1], i[0][3])):
        if t != threads or "gb_s" not in fact or sizes and elements not in sizes:
            continue
        gbs = fact["gb_s"]
        cells = [op, dtype.upper(), f"{size_label(elements)} ({fact['shape']})", f"{gbs:.1f}"]
        for column in ("torch_gb_s", "inductor_gb_s") if inductor else ("torch_gb_s",):
            other = fact.get(column)
            cells += [f"{other:.1f}", f"{gbs / other:.1f}x"] if other else ["-", "-"]
        nt = panel_nt(facts, t, dtype, elements)
        cells += [f"{nt:.1f}", f"{gbs / nt:.2f}"] if nt else ["-", "-"]
        cells.append(f"{fact['gelem_s']:.2f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def compare_table(facts):
    """Markdown rows, per thread count (most first), operator and dtype, every size: infiniop's
    GB/s beside PyTorch eager's and Inductor's (the best of each), the ratios, and infiniop's
    GB/s over its own NT copy of the same bytes (ratio_nt, the roofline)."""
    lines = ["| operator | dtype | threads | shape | infiniop GB/s | eager GB/s | Inductor GB/s | "
             "infiniop / eager | infiniop / Inductor | infiniop / NT copy |",
             "|---|---|---|---|---|---|---|---|---|---|"]

    def cell(value, form):
        return "-" if value is None else format(value, form)

    for (threads, dtype, op, _), fact in sorted(
            facts.items(), key=lambda i: (-i[0][0], i[0][2], i[0][1] != "f32", i[0][3])):
        if "gb_s" not in fact:
            continue
        gbs, eager, inductor = fact["gb_s"], fact.get("torch_gb_s"), fact.get("inductor_gb_s")
        nt = fact.get("nt_gb_s")
        lines.append(f"| {op} | {dtype.upper()} | {threads} | {fact['shape']} | {gbs:.2f} | "
                     f"{cell(eager, '.2f')} | {cell(inductor, '.2f')} | "
                     f"{cell(eager and gbs / eager, '.2f')} | "
                     f"{cell(inductor and gbs / inductor, '.2f')} | "
                     f"{cell(nt and gbs / nt, '.2f')} |")
    return "\n".join(lines)


def bound_table(facts, threads, in_cache_max=256 << 10):
    """Markdown rows: which bound each operator and dtype hits at the largest size run with
    `threads` (bench/README.md, "Compute or memory bound"): the one-thread in-cache rate (the best
    Gelem/s at <= in_cache_max output elements) x threads x bytes per element, against the
    best streaming copy at that size; and the row's ratio to that copy."""
    lines = ["| operator | dtype | 1 thread in cache, Gelem/s | bytes / element | "
             f"{threads} threads x in-cache rate, GB/s | NT copy GB/s | bound | "
             "infiniop / NT copy (largest size) |",
             "|---|---|---|---|---|---|---|---|"]
    pairs = sorted({(op, dtype) for (_, dtype, op, _) in facts})
    for op, dtype in pairs:
        single = [f["gelem_s"] for (t, d, o, n), f in facts.items()
                  if (t, d, o) == (1, dtype, op) and n <= in_cache_max and "gelem_s" in f]
        sizes = [n for (t, d, o, n), f in facts.items() if (t, d, o) == (threads, dtype, op)
                 and "gb_s" in f]
        if not single or not sizes:
            continue
        large = facts[(threads, dtype, op, max(sizes))]
        rate, per_element = max(single), large["bytes_per_element"]
        nt = panel_nt(facts, threads, dtype, max(sizes))
        product = threads * rate * per_element
        bound = "-" if not nt else ("compute" if product < nt else "memory")
        lines.append(f"| {op} | {dtype.upper()} | {rate:.2f} | {per_element:.1f} | "
                     f"{product:.1f} | {nt:.1f} | {bound} | "
                     f"{large['gb_s'] / nt:.2f} ({size_label(max(sizes))}) |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--infiniop", nargs="+", required=True, help="infiniop-bench CSVs")
    parser.add_argument("--torch", nargs="*", default=[], help="compare_torch.py CSVs")
    parser.add_argument("--svg", help="write the plot here")
    parser.add_argument("--check", help="regenerate and compare with this SVG file")
    parser.add_argument("--title", default="infiniop vs PyTorch eager and torch.compile "
                                           "(cpu device, best of runs)")
    parser.add_argument("--table", type=int, nargs="*", metavar="THREADS",
                        help="print the Markdown table of these thread counts (default: all)")
    parser.add_argument("--compare", action="store_true",
                        help="print the Markdown table of infiniop against PyTorch eager and "
                             "Inductor, every row of the CSVs")
    parser.add_argument("--table-sizes", nargs="*", metavar="N",
                        help="only these sizes in the table (N, NK, NM output elements)")
    args = parser.parse_args(argv)
    series, facts = collect(read_rows(args.infiniop), read_rows(args.torch))
    if not series:
        print("no rows to plot", file=sys.stderr)
        return 1
    text = svg_text(series, args.title)
    ElementTree.fromstring(text)  # well-formed, or this raises
    if args.svg:
        with open(args.svg, "w", encoding="utf-8") as handle:
            handle.write(text)
    if args.table is not None:
        for threads in args.table or sorted({k[0] for k in facts}, reverse=True):
            print(f"\n{threads} thread(s):\n")
            print(table(facts, threads, {parse_count(n) for n in args.table_sizes or []}))
            if threads > 1:
                print(f"\nbounds at {threads} threads:\n")
                print(bound_table(facts, threads))
    if args.compare:
        print(compare_table(facts))
    if args.check:
        with open(args.check, encoding="utf-8") as handle:
            if handle.read() != text:
                print(f"{args.check} differs from what the CSVs give: rerun with --svg",
                      file=sys.stderr)
                return 1
        print(f"{args.check}: well-formed and up to date ({len(text)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
