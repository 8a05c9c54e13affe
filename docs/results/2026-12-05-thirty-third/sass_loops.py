"""The loops of a kernel's SASS (cuobjdump -sass), found statically: basic blocks from the
branches, dominators, and each back edge's natural loop; prints the instruction mix of every
loop that holds exponentials or tensor-core GEMMs (the consumers' block loops, the
transposer's), or with --blocks ADDR the basic blocks of the loop headed at ADDR (hex), each
with its size, its last instruction and its mix, to read off a path's length (e.g. a masked
block's and an unmasked block's). Retry branches of mbarrier waits form small loops of their
own and are listed among the blocks. --func N: the N-th function of a file with several.

    cuobjdump -sass forward_e4m3_d64.cu.o > k.sass
    python3 sass_loops.py k.sass [--func 0] [--blocks 89a0]
"""
import argparse
import collections
import re


def parse(path, func):
    instructions, index = [], -1
    for line in open(path):
        if "Function :" in line:
            index += 1
        if func is not None and index != func:
            continue
        m = re.match(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?);", line)
        if m:
            instructions.append((int(m.group(1), 16), m.group(2).strip()))
    return instructions


def opcode(text):
    words = text.split()
    if words[0].startswith("@"):
        words = words[1:]
    return words[0].split(".")[0] if words else ""


def branch_target(text):
    m = re.search(r"0x([0-9a-f]+)\s*$", text.split("BRA", 1)[1]) if "BRA" in text else None
    return int(m.group(1), 16) if m else None


def basic_blocks(instructions):
    at = {address: i for i, (address, _) in enumerate(instructions)}
    leaders = {0}
    for i, (_, text) in enumerate(instructions):
        if opcode(text) in ("BRA", "EXIT", "RET", "BRX", "JMP"):
            if i + 1 < len(instructions):
                leaders.add(i + 1)
            target = branch_target(text) if opcode(text) == "BRA" else None
            if target in at:
                leaders.add(at[target])
    starts = sorted(leaders)
    blocks = {s: (s, starts[k + 1] if k + 1 < len(starts) else len(instructions)) for k, s in enumerate(starts)}
    successors = collections.defaultdict(set)
    for s, (_, end) in blocks.items():
        last = instructions[end - 1][1]
        predicated = last.startswith("@")
        if opcode(last) == "BRA":
            target = branch_target(last)
            if target in at:
                successors[s].add(at[target])
            if predicated and end < len(instructions):
                successors[s].add(end)
        elif opcode(last) in ("EXIT", "RET"):
            if predicated and end < len(instructions):
                successors[s].add(end)
        elif end < len(instructions):
            successors[s].add(end)
    return blocks, successors


def natural_loops(blocks, successors):
    predecessors = collections.defaultdict(set)
    for u, vs in successors.items():
        for v in vs:
            predecessors[v].add(u)
    nodes = sorted(blocks)
    dominators = {n: set(nodes) for n in nodes}
    dominators[0] = {0}
    changed = True
    while changed:
        changed = False
        for n in nodes[1:]:
            sets = [dominators[p] for p in predecessors[n]]
            new = (set.intersection(*sets) if sets else set()) | {n}
            if new != dominators[n]:
                dominators[n], changed = new, True
    loops = collections.defaultdict(set)
    for u in nodes:
        for header in successors[u]:
            if header in dominators[u]:  # a back edge
                body, stack = {header, u}, [u]
                while stack:
                    x = stack.pop()
                    if x != header:
                        for p in predecessors[x]:
                            if p not in body:
                                body.add(p)
                                stack.append(p)
                loops[header] |= body
    return loops


def mix(instructions, blocks, members, top=40):
    counts = collections.Counter(opcode(instructions[i][1]) for b in members for i in range(*blocks[b]))
    return sum(counts.values()), ", ".join(f"{k} {v}" for k, v in counts.most_common(top))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("sass")
    parser.add_argument("--func", type=int)
    parser.add_argument("--blocks", help="hex address of a loop header")
    args = parser.parse_args()
    instructions = parse(args.sass, args.func)
    blocks, successors = basic_blocks(instructions)
    for header, body in sorted(natural_loops(blocks, successors).items()):
        address = instructions[header][0]
        if args.blocks is not None:
            if address != int(args.blocks, 16):
                continue
            for b in sorted(body):
                size, text = mix(instructions, blocks, [b], 12)
                print(f"{instructions[b][0]:05x} n={size:4d} last=[{instructions[blocks[b][1] - 1][1][:60]}] {text}")
            continue
        size, text = mix(instructions, blocks, body)
        if any(op in text for op in ("MUFU", "QGMMA", "HGMMA", "LDSM")):
            print(f"loop@{address:05x} blocks={len(body)} n={size}: {text}\n")


if __name__ == "__main__":
    main()
