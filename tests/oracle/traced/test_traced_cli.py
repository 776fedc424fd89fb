"""``numoracle run --reference``: a PyTorch function as the op on the command line."""

from __future__ import annotations

import pytest

from numoracle.cli import main


@pytest.fixture(autouse=True)
def _wide_console(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")


def test_torch_running_the_reference_passes(capsys, tmp_path):
    code = main(["run", "--reference", "torch:tanh", "--inputs", "input=batch,n",
                 "--dims", "n=1:16", "--examples", "8", "--budget", "300",
                 "--store", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "traced_tanh" in out and "torch-cpu-fp32" in out


def test_a_kernel_named_on_the_command_line_is_judged(capsys, tmp_path):
    # torch.sigmoid is not tanh: caught
    code = main(["run", "--reference", "torch:tanh", "--inputs", "input=batch,n",
                 "--dims", "n=1:16",  # the op of the test above: one op of a name per process
                 "--kernel", "torch.nn.functional:sigmoid", "--examples", "8",
                 "--budget", "300", "--store", str(tmp_path)])
    captured = capsys.readouterr()
    assert code != 0 and "FAIL" in captured.out + captured.err


@pytest.mark.parametrize(("argv", "match"), [
    (["--inputs", "input"], "NAME=DIM"),
    (["--inputs", "input=n", "--dims", "n=4"], "DIM=LO:HI"),
    ([], "needs --inputs"),
])
def test_bad_reference_arguments(argv, match, capsys):
    code = main(["run", "--reference", "torch:tanh", *argv])
    assert code != 0
    assert match in capsys.readouterr().err
