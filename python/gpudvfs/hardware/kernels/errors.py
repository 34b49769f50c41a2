"""Errors of the microbenchmark tool chain."""

from __future__ import annotations


class ManifestError(ValueError):
    """The manifest is malformed; the message names the file, the entry and what was expected."""


class ToolchainMissing(RuntimeError):
    """A compiler or disassembler package is not installed; the message says which to install."""


class CompileError(RuntimeError):
    """NVRTC rejected a source; ``log`` holds the compiler's messages, appended to the message."""

    def __init__(self, message: str, log: str = "") -> None:
        super().__init__(f"{message}\n{log}" if log else message)
        self.log = log


class DisassemblyError(RuntimeError):
    """nvdisasm failed on a CUBIN."""


class UnsupportedArchitecture(DisassemblyError):
    """The installed nvdisasm no longer handles this architecture (CUDA 13 dropped sm_70)."""
