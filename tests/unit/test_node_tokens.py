"""`shepherd-ha token create/delete --node NAME`: per-node tokens in the token file."""
import os
import stat

from shepherd_ha.api import auth
from shepherd_ha.cli import main


def test_token_create_gives_a_node_its_own_identity_and_the_replica_sees_it_at_once(tmp_path, capsys):
    path = tmp_path / "tokens.csv"
    path.write_text('%s,admin,admin,"system:masters"\n' % ("a" * 32))
    table = auth.load_token_file(str(path))              # what a running replica holds
    assert main.main(["token", "create", "--node", "w1", "--token-file", str(path)]) == 0
    token = capsys.readouterr().out.strip()
    assert len(token) == 64 and stat.S_IMODE(os.stat(path).st_mode) == 0o600
    user = table.authenticate(token)
    assert user.name == "system:node:w1" and user.groups == ("system:nodes",)
    assert table.authenticate("a" * 32).name == "admin"
    # a second token for the same node needs --rotate; the old one then stops working
    assert main.main(["token", "create", "--node", "w1", "--token-file", str(path)]) == 1
    assert "--rotate" in capsys.readouterr().err
    out = tmp_path / "w1.token"
    assert main.main(["token", "create", "--node", "w1", "--token-file", str(path), "--rotate",
                      "--output", str(out)]) == 0
    new = out.read_text().strip()
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o600
    assert table.authenticate(token) is None and table.authenticate(new).name == "system:node:w1"
    assert main.main(["token", "delete", "--node", "w1", "--token-file", str(path)]) == 0
    assert table.authenticate(new) is None
    assert main.main(["token", "delete", "--node", "w1", "--token-file", str(path)]) == 1


def test_a_bad_node_name_is_refused(tmp_path, capsys):
    path = tmp_path / "tokens.csv"
    assert main.main(["token", "create", "--node", "W1,x", "--token-file", str(path)]) == 1
    assert "not a valid name" in capsys.readouterr().err and not path.exists()
