"""The iptables binaries the proxy runs: one atomic `iptables-restore --noflush`
per sync, `iptables -C/-I` for the jumps from the built-in chains, `iptables-save`
only to learn which of our chains exist (names, never rule text: the kernel prints
rules differently from how they were fed in; the one exception is the OWNER chain's
comment, read for the cluster it names), and the cleanup.

The binaries, not python-iptables: that library writes the legacy tables, which the
nf_tables backend used by Debian 12 and by Docker does not see. `prefix` runs them
elsewhere (`ip netns exec NAME`), which is how the integration tests drive the real
code inside a namespace.
"""
import logging
import re
import shlex
import subprocess

from .rules import DOCKER_USER_JUMP, JUMPS, OWNER, PREFIX, SERVICES, TABLES, claim_of

log = logging.getLogger(__name__)


class IptablesError(Exception):
    pass


class Iptables:
    def __init__(self, prefix=(), timeout=300.0):   # a full write of 10,000 chains takes seconds, more under load
        self.prefix = list(prefix)
        self.timeout = timeout

    def run(self, args, stdin=None, check=True):
        cmd = self.prefix + list(args)
        try:
            proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=self.timeout)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise IptablesError("%s: %s" % (" ".join(cmd[:len(self.prefix) + 2]), exc))
        if check and proc.returncode != 0:
            raise IptablesError("%s failed (%d): %s" % (" ".join(cmd[:len(self.prefix) + 3]), proc.returncode,
                                                        (proc.stderr or proc.stdout).strip()[:2000]))
        return proc

    def restore(self, text):
        """Apply `text` atomically: all of it or, on an error, none of it."""
        self.run(["iptables-restore", "--noflush", "--wait"], stdin=text)

    def our_chains(self):
        """{table: {chain names with our prefix}} as the kernel has them."""
        found = {}
        for table in TABLES:
            out = self.run(["iptables-save", "-t", table]).stdout
            found[table] = set(re.findall(r"^:(%s\S+)" % re.escape(PREFIX), out, re.M))
        return found

    def claim(self, present=None):
        """The rules.Claim in the kernel's OWNER chain (nat), or None (no such chain, or no
        claim in it); `present`: our_chains() when the caller has it. Any other failure
        raises: a proxy that cannot read the claim must not take a host that may be another's."""
        if OWNER not in (present or self.our_chains())["nat"]:
            return None
        return claim_of(self.run(["iptables", "-w", "-t", "nat", "-S", OWNER]).stdout.splitlines())

    def release(self, owner):
        """Delete the OWNER chain if it holds `owner`'s claim (a proxy stopping): the next
        cluster's proxy need not wait for the claim to go stale."""
        found = self.claim()
        if found is not None and found.owner == owner:
            self.restore("*nat\n:%s - [0:0]\n-X %s\nCOMMIT\n" % (OWNER, OWNER))

    def ensure_jumps(self):
        """The jumps into our chains, each once (inserted first, so Docker's own
        rules in the same chains cannot shadow them). Returns how many were added."""
        added = 0
        for table, chain, rule in JUMPS:
            target = rule.rsplit(" ", 1)[1]
            self.run(["iptables", "-w", "-t", table, "-N", target], check=False)   # exists: fine
            args = shlex.split(rule)
            if self.run(["iptables", "-w", "-t", table, "-C", chain] + args, check=False).returncode != 0:
                self.run(["iptables", "-w", "-t", table, "-I", chain, "1"] + args)
                added += 1
        return added + self._first_in_docker_user()

    def _first_in_docker_user(self):
        """DOCKER_USER_JUMP as the first rule of DOCKER-USER (when Docker made that chain)."""
        proc = self.run(["iptables", "-w", "-t", "filter", "-S", "DOCKER-USER"], check=False)
        if proc.returncode != 0:
            return 0
        present = [line for line in proc.stdout.splitlines() if line.startswith("-A ")]
        if present and present[0].endswith("-j " + SERVICES) and sum(l.endswith("-j " + SERVICES) for l in present) == 1:
            return 0
        self._delete_docker_user_jump()
        self.run(["iptables", "-w", "-t", "filter", "-I", "DOCKER-USER", "1"] + shlex.split(DOCKER_USER_JUMP))
        return 1

    def _delete_docker_user_jump(self):
        for _ in range(10):             # bounded
            if self.run(["iptables", "-w", "-t", "filter", "-D", "DOCKER-USER"] + shlex.split(DOCKER_USER_JUMP),
                        check=False).returncode != 0:
                break

    def cleanup(self):
        """Remove every jump and chain of ours (shepherd-agent network cleanup).
        Returns the number of chains deleted."""
        for table, chain, rule in JUMPS:
            args = shlex.split(rule)
            for _ in range(10):         # a jump added twice by hand goes too; bounded
                if self.run(["iptables", "-w", "-t", table, "-D", chain] + args, check=False).returncode != 0:
                    break
        self._delete_docker_user_jump()
        chains = self.our_chains()
        lines = []
        for table in TABLES:
            if not chains[table]:
                continue
            lines.append("*" + table)
            lines += [":%s - [0:0]" % c for c in sorted(chains[table])]
            lines += ["-X %s" % c for c in sorted(chains[table])]
            lines.append("COMMIT")
        if lines:
            self.restore("\n".join(lines) + "\n")
        return sum(len(c) for c in chains.values())
