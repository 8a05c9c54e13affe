"""Warp-stall samples per SASS instruction from Nsight Compute's source page
(`ncu --import R.ncu-rep --page source --print-source sass --csv > R-sass.csv`; the report
needs `--section SourceCounters`):
    python3 scripts/ncu_sass_stalls.py opcodes A.csv [B.csv]   samples and top stalls per opcode
    python3 scripts/ncu_sass_stalls.py top A.csv stall_wait [N]  the N instructions with most of one stall
    python3 scripts/ncu_sass_stalls.py window A.csv ADDRESS [BEFORE AFTER]  the stalls around one instruction
"""
import collections
import csv
import re
import sys

SHOWN = ["stall_wait", "stall_short_sb", "stall_long_sb", "stall_mio", "stall_barrier", "stall_selected"]


def load(path):
    rows = list(csv.reader(open(path)))
    header, data = rows[1], rows[2:]  # row 0 names the kernel
    return {name: i for i, name in enumerate(header)}, data


def number(row, column):
    try:
        return float(row[column] or 0)
    except (ValueError, IndexError):
        return 0.0


def stall_columns(columns):
    return [name for name in columns if name.startswith("stall_") and "Not Issued" not in name]


def opcodes(path):
    columns, data = load(path)
    per_op = collections.defaultdict(collections.Counter)
    for row in data:
        op = re.sub(r"^@!?U?P\w+\s+", "", row[columns["Source"]].strip()).split(" ")[0].split(".")[0]
        for name in stall_columns(columns):
            per_op[op][name] += number(row, columns[name])
        per_op[op]["executed"] += number(row, columns["Instructions Executed"])
    return per_op


def samples(counter):
    return sum(v for k, v in counter.items() if k != "executed")


def main(argv):
    command, path = argv[1], argv[2]
    if command == "opcodes":
        tables = [opcodes(p) for p in argv[2:4]]
        ops = sorted(set().union(*tables), key=lambda op: -sum(samples(t.get(op, {})) for t in tables))
        for op in ops[:25]:
            cells = []
            for t in tables:
                c = t.get(op, collections.Counter())
                top = ", ".join(f"{k[6:]} {v:.0f}" for k, v in c.most_common(4) if k != "executed")
                cells.append(f"{samples(c):8.0f} samples {c['executed']:12.0f} executed ({top})")
            print(f"{op:10s} " + " | ".join(cells))
    elif command == "top":
        columns, data = load(path)
        column, count = columns[argv[3]], int(argv[4]) if len(argv) > 4 else 20
        for row in sorted(data, key=lambda r: -number(r, column))[:count]:
            print(f"{number(row, column):8.0f} {row[columns['Address']]} {row[columns['Source']].strip()[:90]}")
    elif command == "window":
        columns, data = load(path)
        before, after = (int(argv[4]), int(argv[5])) if len(argv) > 5 else (20, 20)
        at = next(i for i, r in enumerate(data) if r[columns["Address"]] == argv[3])
        print("executed " + " ".join(f"{name[6:13]:>8s}" for name in SHOWN))
        for row in data[max(0, at - before):at + after]:
            print(f"{number(row, columns['Instructions Executed']):9.0f} " +
                  " ".join(f"{number(row, columns[name]):8.0f}" for name in SHOWN) +
                  f"  {row[columns['Address']][-5:]} {row[columns['Source']].strip()[:80]}")
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
