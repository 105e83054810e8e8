"""sheepctl in unit tests: ctl.main.main([...]) against real API servers (real_api.py), with
nothing of the machine's own configuration let in (conftest's `ctl_isolated` and `ctl`)."""
import os

from ctl.main import main


def isolate(monkeypatch, home):
    """No SHEPHERD_* setting from the environment (servers, config, token, ...), and HOME at
    `home` (so no ~/.shepherd/config of the machine's user is read)."""
    # (SHEPHERD_VERIFY_SHARING is the suite's own check, tests/conftest.py: kept)
    for name in [n for n in os.environ if n.startswith("SHEPHERD_") and n != "SHEPHERD_VERIFY_SHARING"]:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(home))


def run_ctl(servers, capsys, *argv, stdin=None):
    """(exit code, stdout, stderr) of `sheepctl --server URL[,URL...] ARGV...`; `servers`: an
    ApiServer or a list of them."""
    servers = servers if isinstance(servers, (list, tuple)) else [servers]
    capsys.readouterr()
    rc = main(["--server", ",".join(s.url for s in servers)] + [str(a) for a in argv], stdin=stdin)
    cap = capsys.readouterr()
    return rc, cap.out, cap.err
