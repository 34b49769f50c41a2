"""Disassembly (nvdisasm) and the checks on it.

Instruction classes, loops, the hot loop, which class dominates it and the arithmetic
intensity.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import tempfile
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from gpudvfs.hardware.kernels.errors import DisassemblyError, ToolchainMissing, UnsupportedArchitecture

# Instruction classes of the disassembly. The six "work" classes are what the benchmarks aim
# at; LOCAL is register spilling (never wanted in a measurement loop); the rest is overhead.
WORK_CLASSES = ("SP", "DP", "INT", "SFU", "SHARED", "GLOBAL")
SASS_CLASSES = WORK_CLASSES + ("LOCAL", "CONTROL", "OTHER")
MEMORY_CLASSES = ("SHARED", "GLOBAL", "LOCAL")

_OPCODE_CLASS: dict[str, str] = {}
for _cls, _ops in {
    "SP": "FFMA FADD FMUL FMNMX FSETP FSEL FSET FCHK FSWZADD",
    "DP": "DFMA DADD DMUL DSETP DMNMX",
    "INT": ("IMAD IADD3 IADD LOP3 LOP SHF SHL SHR LEA IMNMX ISETP IABS POPC FLO BREV PRMT SEL "
            "IMUL XMAD BMSK SGXT IDP ISCADD VIADD VIMNMX IMNMX3 ICMP"),
    "SFU": "MUFU",
    "SHARED": "LDS STS ATOMS LDSM",
    "GLOBAL": "LDG STG ATOMG RED ATOM",
    "LOCAL": "LDL STL",
    "CONTROL": ("BRA BRX JMP JMX CALL RET EXIT BAR BSSY BSYNC WARPSYNC YIELD NOP BPT KILL "
                "DEPBAR BREAK BMOV"),
}.items():
    for _op in _ops.split():
        _OPCODE_CLASS[_op] = _cls


# --------------------------------------------------------------------------------------------
# Disassembly

def nvdisasm_path() -> Path:
    """``$GPUDVFS_NVDISASM``, else the ``nvidia-cuda-nvdisasm`` wheel's, else ``PATH``'s; `ToolchainMissing`: none."""
    env = os.environ.get("GPUDVFS_NVDISASM")
    if env:
        if not Path(env).is_file():
            raise ToolchainMissing(f"GPUDVFS_NVDISASM={env} is not a file")
        return Path(env)
    for dist in ("nvidia-cuda-nvdisasm", "nvidia-cuda-nvdisasm-cu12"):
        try:
            files = metadata.files(dist) or []
        except metadata.PackageNotFoundError:
            continue
        for f in files:
            # the wheel's RECORD lists the binary (nvidia/cu13/bin/nvdisasm in CUDA 13)
            if f.name == "nvdisasm" and Path(str(f.locate())).is_file():
                return Path(str(f.locate())).resolve()
    found = shutil.which("nvdisasm")
    if found:
        return Path(found)
    raise ToolchainMissing("nvdisasm not found: pip install nvidia-cuda-nvdisasm "
                           "(or set GPUDVFS_NVDISASM)")


def disassemble(cubin: bytes) -> str:
    """SASS text of a CUBIN, from ``nvdisasm -c`` (code sections only).

    Raises
    ------
    ToolchainMissing
        Where nvdisasm is not found or not executable.
    UnsupportedArchitecture
        Where this nvdisasm no longer handles the CUBIN's architecture.
    DisassemblyError
        Where nvdisasm fails otherwise.
    """
    tool = nvdisasm_path()
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "module.cubin"
        f.write_bytes(cubin)
        try:
            proc = subprocess.run([str(tool), "-c", str(f)], capture_output=True, text=True, timeout=120)
        except PermissionError:
            raise ToolchainMissing(f"{tool} is not executable (chmod +x it)") from None
    if proc.returncode != 0:
        msg = proc.stderr.strip() or proc.stdout.strip()
        if "deprecated" in msg or "not supported" in msg.lower():
            raise UnsupportedArchitecture(f"{tool}: {msg}")
        raise DisassemblyError(f"{tool} failed ({proc.returncode}): {msg}")
    return proc.stdout


@dataclass(frozen=True)
class Instruction:
    """One SASS instruction at ``address`` in its function.

    ``predicate`` is ``""`` or e.g. ``"@!P0"``; ``opcode`` the full mnemonic with modifiers, e.g.
    ``"LDG.E.128.STRONG.GPU"``; ``operands`` as nvdisasm prints them; ``target`` the branch target's
    address, for branches to a label.
    """

    address: int
    predicate: str
    opcode: str
    operands: str
    target: int | None

    @property
    def base(self) -> str:
        """The opcode without modifiers (``LDG`` for ``LDG.E.128``)."""
        return self.opcode.split(".", 1)[0]

    @property
    def cls(self) -> str:
        """Its class (`instruction_class`)."""
        return instruction_class(self.opcode)


def instruction_class(opcode: str) -> str:
    """The class (one of ``SASS_CLASSES``) of a mnemonic, with or without modifiers.

    Uniform-datapath instructions (``U...``: scalar per warp, their own pipeline) and
    moves/conversions/special registers are OTHER.
    """
    return _OPCODE_CLASS.get(opcode.split(".", 1)[0], "OTHER")


_INSN = re.compile(r"/\*([0-9a-f]+)\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Za-z0-9_]+)*)\s*(.*?)\s*;")
_LABEL = re.compile(r"^\s*(\.L\w+):\s*$")
_FUNC = re.compile(r"^\s*\.text\.(\S+):\s*$")
_TARGET = re.compile(r"`\((\.L\w+)\)")


def parse_sass(text: str) -> dict[str, list[Instruction]]:
    """Mangled function name -> its instructions in order, from ``nvdisasm -c`` output."""
    funcs: dict[str, list[tuple[int, str, str, str]]] = {}
    labels: dict[str, dict[str, int]] = {}
    current: str | None = None
    pending: list[str] = []
    for line in text.splitlines():
        fm = _FUNC.match(line)
        if fm:
            current = fm.group(1)
            funcs.setdefault(current, [])
            labels.setdefault(current, {})
            pending = []
            continue
        if current is None:
            continue
        lm = _LABEL.match(line)
        if lm:
            pending.append(lm.group(1))
            continue
        im = _INSN.search(line)
        if im:
            addr = int(im.group(1), 16)
            for lab in pending:
                labels[current][lab] = addr
            pending = []
            funcs[current].append((addr, (im.group(2) or "").strip(), im.group(3), im.group(4)))
    out: dict[str, list[Instruction]] = {}
    for name, insns in funcs.items():
        labs = labels[name]
        result = []
        for addr, pred, op, operands in insns:
            tm = _TARGET.search(operands)
            target = labs.get(tm.group(1)) if tm and op.split(".", 1)[0] in ("BRA", "JMP") else None
            result.append(Instruction(addr, pred, op, operands, target))
        out[name] = result
    return out


@dataclass(frozen=True)
class Loop:
    """A loop: from a backward branch's target label (index ``start``) to the branch (``end``), inclusive."""

    start: int
    end: int
    body: tuple[Instruction, ...]

    def counts(self) -> Counter:
        """Instructions per class (`instruction_class`)."""
        return Counter(i.cls for i in self.body)

    def opcode_counts(self) -> Counter:
        """Instructions per base opcode (``FFMA``, ``LDG``, ...)."""
        return Counter(i.base for i in self.body)


def find_loops(insns: list[Instruction]) -> list[Loop]:
    """Every loop of a function, in the order their branches come.

    A branch whose target lies at or before it closes a loop over the instructions in between.
    Branches to themselves (the padding after EXIT) are skipped.
    """
    index = {ins.address: k for k, ins in enumerate(insns)}
    loops = []
    for k, ins in enumerate(insns):
        if ins.target is not None and ins.target < ins.address and ins.target in index:
            s = index[ins.target]
            loops.append(Loop(s, k, tuple(insns[s:k + 1])))
    return loops


def hot_loop(insns: list[Instruction]) -> Loop:
    """The measurement loop of a benchmark kernel; `ValueError` where it has no loop.

    Among the innermost loops (those whose range holds no other loop), the one with the most
    work-class instructions (ties: the first). This is what "the loop" means in the SASS
    checks: the code that repeats during the measurement, unaffected by set-up code before it
    or by loops that enclose it.
    """
    loops = find_loops(insns)
    if not loops:
        raise ValueError("no loop (no backward branch) in this function")
    inner = [lp for lp in loops
             if not any(o is not lp and lp.start <= o.start and o.end <= lp.end for o in loops)]
    return max(inner, key=lambda lp: sum(1 for i in lp.body if i.cls in WORK_CLASSES))


def dominates(loop: Loop, cls: str, exempt: Iterable[str] = ()) -> bool:
    """Whether class ``cls`` dominates a loop.

    It does when the loop holds at least one of its instructions and no other work class
    (except the ``exempt`` ones, deliberately mixed in) has more.
    """
    c = loop.counts()
    skip = set(exempt) | {cls}
    return c[cls] > 0 and all(c[cls] >= c[k] for k in WORK_CLASSES if k not in skip)


def intensity(loop: Loop, numerator: str, denominator: Iterable[str]) -> float:
    """Instructions of one class per instruction of others; infinite where the loop has none of the ``denominator``."""
    c = loop.counts()
    den = sum(c[d] for d in denominator)
    return math.inf if den == 0 else c[numerator] / den
