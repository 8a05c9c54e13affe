import pytest
import torch


def hopper_unavailable_reason():
    if not torch.cuda.is_available():
        return "no CUDA device"
    major, minor = torch.cuda.get_device_capability()
    if (major, minor) != (9, 0):
        return f"{torch.cuda.get_device_name()} is sm_{major}{minor}, not Hopper sm_90"
    return None


_REASON = hopper_unavailable_reason()
requires_hopper = pytest.mark.skipif(_REASON is not None, reason=f"GPU test skipped: {_REASON}")


def pytest_report_header(config):
    return f"warpflash GPU tests: {'run on ' + torch.cuda.get_device_name() if _REASON is None else 'SKIPPED (' + _REASON + ')'}"


def pytest_terminal_summary(terminalreporter):
    if _REASON is not None:
        terminalreporter.write_line(f"warpflash GPU tests SKIPPED: {_REASON}", yellow=True)
