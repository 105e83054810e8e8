"""The PySyncObj overrides refuse to run against a PySyncObj that lacks what they reach into:
another version, a mangled name gone, an overridden method renamed or reshaped."""
import _socket
import configparser
import os
import socket
import subprocess
import sys

import pytest
import pysyncobj.syncobj
from pysyncobj.journal import FileJournal
from pysyncobj.syncobj import SyncObj

from shepherd_ha.store import pysyncobj_overrides as overrides
from shepherd_ha.store.pysyncobj_overrides import compat

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def check():
    compat.check_names([overrides.syncobj, overrides.journal, overrides.transport], overrides.OVERRIDES)


def test_the_installed_pysyncobj_passes_the_check():
    check()
    compat.check_version()


def test_the_pin_in_setup_cfg_is_the_version_checked():
    parser = configparser.ConfigParser()
    parser.read(os.path.join(ROOT, "setup.cfg"))
    pins = [line.strip() for line in parser["options"]["install_requires"].splitlines() if "pysyncobj" in line]
    assert pins == ["pysyncobj==%s" % compat.PINNED_VERSION]


def test_another_version_is_refused_with_what_to_do(monkeypatch):
    monkeypatch.setattr(compat, "installed_version", lambda: "0.3.18")
    with pytest.raises(compat.PySyncObjMismatch) as info:
        compat.check_version()
    message = str(info.value)
    assert "needs PySyncObj 0.3.17" in message and "found 0.3.18" in message
    assert "pysyncobj==0.3.17" in message and "PINNED_VERSION" in message


def test_another_version_fails_the_import_of_the_raft_layer():
    code = ("import importlib.metadata as m; real = m.version\n"
            "m.version = lambda name: '0.4.0' if name.lower() == 'pysyncobj' else real(name)\n"
            "import shepherd_ha.store.replica\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT))
    assert proc.returncode != 0
    assert "PySyncObjMismatch" in proc.stderr and "found 0.4.0" in proc.stderr


def test_a_mangled_method_gone_is_named(monkeypatch):
    monkeypatch.delattr(SyncObj, "_SyncObj__sendAppendEntries")
    with pytest.raises(compat.PySyncObjMismatch) as info:
        check()
    message = str(info.value)
    assert "uses _SyncObj__sendAppendEntries, which SyncObj neither defines nor sets" in message
    assert "overrides SyncObj._SyncObj__sendAppendEntries, which is gone" in message


def test_an_instance_attribute_no_longer_set_is_named(monkeypatch):
    real = compat.attributes_set
    monkeypatch.setattr(compat, "attributes_set", lambda cls: real(cls) - {"_SyncObj__raftNextIndex"})
    with pytest.raises(compat.PySyncObjMismatch, match="_SyncObj__raftNextIndex, which SyncObj neither"):
        check()


def test_a_journal_internal_gone_is_named(monkeypatch):
    real = compat.attributes_set
    monkeypatch.setattr(compat, "attributes_set", lambda cls: real(cls) - {"_FileJournal__currentOffset"})
    with pytest.raises(compat.PySyncObjMismatch, match="_FileJournal__currentOffset"):
        check()


def test_a_renamed_journal_method_is_named(monkeypatch):
    for cls in FileJournal.__mro__[:-1]:      # the method and the Journal interface's declaration of it
        if "deleteEntriesTo" in vars(cls):
            monkeypatch.delattr(cls, "deleteEntriesTo")
    with pytest.raises(compat.PySyncObjMismatch,
                       match="DurableFileJournal overrides FileJournal.deleteEntriesTo, which is gone"):
        check()


def test_a_reshaped_method_is_named(monkeypatch):
    def sendNextNodeIdx(self, node, reset=False, nextNodeIdx=None, success=False, term=None):
        pass
    monkeypatch.setattr(SyncObj, "_SyncObj__sendNextNodeIdx", sendNextNodeIdx)
    with pytest.raises(compat.PySyncObjMismatch, match=r"PipelinedSyncObj._SyncObj__sendNextNodeIdx.* no longer "
                                                        r"matches SyncObj._SyncObj__sendNextNodeIdx.*term"):
        check()


def test_the_journal_factory_gone_is_named(monkeypatch):
    monkeypatch.delattr(pysyncobj.syncobj, "createJournal")
    with pytest.raises(compat.PySyncObjMismatch, match="pysyncobj.syncobj.createJournal is gone"):
        check()


def test_a_transport_internal_gone_is_named(monkeypatch):
    real = compat.attributes_set
    monkeypatch.setattr(compat, "attributes_set", lambda cls: real(cls) - {"_TcpConnection__readBuffer",
                                                                          "_unknownConnections"})
    with pytest.raises(compat.PySyncObjMismatch) as info:
        check()
    assert "_TcpConnection__readBuffer, which TcpConnection neither defines nor sets" in str(info.value)
    assert "TCPTransport no longer has _unknownConnections" in str(info.value)


def test_a_renamed_connection_method_is_named(monkeypatch):
    from pysyncobj.tcp_connection import TcpConnection
    monkeypatch.delattr(TcpConnection, "_TcpConnection__processParseMessage")
    with pytest.raises(compat.PySyncObjMismatch,
                       match="GuardedConnection overrides TcpConnection._TcpConnection__processParseMessage"):
        check()


def test_the_pickle_swap_still_reaches_pysyncobj(monkeypatch):
    import pysyncobj.serializer
    real = compat.names_used
    monkeypatch.setattr(compat, "names_used", lambda obj: real(obj) - {"pickle"} if obj is
                        pysyncobj.serializer.Serializer else real(obj))
    with pytest.raises(compat.PySyncObjMismatch, match="Serializer no longer uses pickle"):
        check()


def test_an_override_must_be_declared():
    class Sneaky(SyncObj):
        _OVERRIDES = ("_onTick",)

        def _onTick(self, timeToWait=0.0):
            pass

        def _checkCommandsToApply(self):
            pass
    problems = compat.bad_overrides(Sneaky, SyncObj)
    assert problems == ["Sneaky replaces SyncObj._checkCommandsToApply without declaring it in _OVERRIDES"]


def test_an_unknown_conf_option_is_refused():
    with pytest.raises(compat.PySyncObjMismatch, match="no option appendEntriesBatchSize_typo"):
        overrides.checked_conf(appendEntriesPeriod=0.05, appendEntriesBatchSize_typo=1)
    assert overrides.checked_conf(appendEntriesPeriod=0.07).appendEntriesPeriod == 0.07


def test_socket_functions_are_the_c_ones_after_import():
    assert socket.inet_ntop is _socket.inet_ntop and socket.inet_pton is _socket.inet_pton
    assert socket.inet_ntop(socket.AF_INET6, socket.inet_pton(socket.AF_INET6, "::1")) == "::1"


def test_dumps_are_compressed_fast_and_read_back(tmp_path):
    from pysyncobj.serializer import Serializer
    path = str(tmp_path / "raft.dump")
    data = ([{"_SyncObj__enabledCodeVersion": 0}, {"objects": ["x" * 100] * 1000}], (b"\x01", 2, 0), (b"\x01", 1, 0),
            set())
    serializer = Serializer(path, 1024, False, None, None, None)     # written in this process, not a child
    serializer.serialize(data, 2)
    with open(path, "rb") as fh:
        header = fh.read(10)
    assert header[:2] == b"\x1f\x8b" and header[8] == 4, "gzip's XFL byte says level 1 (4), 9 would say 2"
    assert serializer.deserialize() == data


def test_the_gzip_swap_still_reaches_pysyncobj(monkeypatch):
    import pysyncobj.serializer
    real = compat.names_used
    monkeypatch.setattr(compat, "names_used", lambda obj: real(obj) - {"gzip"} if obj is
                        pysyncobj.serializer.Serializer else real(obj))
    with pytest.raises(compat.PySyncObjMismatch, match="Serializer no longer uses gzip"):
        check()
