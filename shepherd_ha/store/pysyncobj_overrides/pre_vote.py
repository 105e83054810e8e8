"""Raft pre-vote (Raft thesis 9.6; etcd's --pre-vote), mixed into PipelinedSyncObj.

PySyncObj campaigns as soon as a follower's election timeout passes: it raises its
term and asks for votes, and a leader that sees the higher term steps down. So one
follower that alone stops hearing the leader (a lost link, a slow path to it, its own
stall) deposes a leader the rest of the cluster still follows: every term change is a
leaderless gap, failed writes and re-activated controllers. Before campaigning a node
now asks its peers whether they would vote for it at the next term, without changing
any term. A peer says yes only if the candidate's log is as up to date as its own and
it has not heard from a leader within the minimum election timeout (a leader never
says yes). Only with a majority of yeses does the real campaign start.

A refusal carries the refuser's term, and a higher one is taken (as a follower, no vote
cast), as in etcd: a node with the longer log but a lower term could otherwise never
win a pre-vote from one with a higher term and a shorter log, and two such survivors
would elect nobody. A leadership transfer (timeout_now) campaigns at once.

The tick and message hooks are in syncobj.py; compat checks the names used here.
"""
import random

from pysyncobj.monotonic import monotonic as raft_clock   # PySyncObj's deadline clock
from pysyncobj.syncobj import _RAFT_STATE


class PreVote:
    """Needs the host's EARLY_ELECTION_STEP and EARLY_ELECTION_JITTER (syncobj.py)."""

    # PySyncObj reads the clock again when it checks the deadline: one this close counts
    # as passed here already, so it never campaigns unasked.
    DUE_EARLY = 0.005

    def _init_pre_vote(self):
        self._pre_vote = None              # (round, term asked for, nodes that granted it) while asking
        self._pre_vote_round = 0
        self._leader_link_lost = False     # the leader's connection dropped: ask again soon, once
        self._pre_vote_won_in = None       # the term a won pre-vote lets this node campaign from
        self._pre_votes_sent = 0           # rounds asked (tests, status)
        self._last_leader_contact = None   # raft_clock() of the last append from a current leader

    def _pre_vote_after_tick(self):
        if self._pre_vote_won_in is not None and self._SyncObj__raftCurrentTerm != self._pre_vote_won_in:
            self._pre_vote_won_in = None    # the campaign it allowed has started

    def _pre_vote_leader_heard(self):
        """A current leader reached us: no pre-vote of ours or anyone's is needed now."""
        self._last_leader_contact = raft_clock()
        self._pre_vote = self._pre_vote_won_in = None

    def _pre_vote_leader_lost(self):
        """The leader's connection dropped: grant the survivors' pre-votes at once."""
        self._last_leader_contact = None
        self._leader_link_lost = True

    def _pre_vote_if_due(self):
        state = self._SyncObj__raftState
        if (state == _RAFT_STATE.LEADER or self.selfNode is None or not self.otherNodes
                or not self._SyncObj__transport.ready or self._SyncObj__transferInProgress):
            return
        now = raft_clock()
        if self._pre_vote_won_in is not None or self._SyncObj__raftElectionDeadline > now + self.DUE_EARLY:
            return                      # due and allowed (PySyncObj campaigns), or not due
        if not self._SyncObj__connectedToAnyone():
            return                      # PySyncObj waits too
        term = self._SyncObj__raftCurrentTerm + 1
        self._pre_vote_round += 1
        self._pre_vote = (self._pre_vote_round, term, {self.selfNode})
        self._pre_votes_sent += 1
        # Ask again after a full timeout, or once soon after the leader's link dropped (the
        # survivors may not all have noticed yet when the first one asks).
        wait = (self.EARLY_ELECTION_STEP + random.uniform(0.0, self.EARLY_ELECTION_JITTER)
                if self._leader_link_lost else self._SyncObj__generateRaftTimeout())
        self._leader_link_lost = False
        self._SyncObj__raftElectionDeadline = now + wait
        for node in self.otherNodes:
            self._SyncObj__transport.send(node, {
                "type": "pre_vote", "round": self._pre_vote_round, "term": term,
                "last_log_index": self._SyncObj__getCurrentLogIndex(),
                "last_log_term": self._SyncObj__getCurrentLogTerm()})

    def _answer_pre_vote(self, node, message):
        term, index, log_term = message.get("term"), message.get("last_log_index"), message.get("last_log_term")
        if not all(type(v) is int for v in (term, index, log_term)):
            return
        leader_heard = (self._SyncObj__raftState == _RAFT_STATE.LEADER or (
            self._last_leader_contact is not None
            and raft_clock() - self._last_leader_contact < self.conf.raftMinTimeout))
        up_to_date = (log_term, index) >= (self._SyncObj__getCurrentLogTerm(), self._SyncObj__getCurrentLogIndex())
        granted = term > self._SyncObj__raftCurrentTerm and up_to_date and not leader_heard
        self._SyncObj__transport.send(node, {"type": "pre_vote_response", "round": message.get("round"),
                                             "term": term, "granted": granted,
                                             "current_term": self._SyncObj__raftCurrentTerm})

    def _count_pre_vote(self, node, message):
        if self._pre_vote is None or node not in self.otherNodes or self._SyncObj__raftState == _RAFT_STATE.LEADER:
            return
        round_, term, granted = self._pre_vote
        if message.get("round") != round_ or message.get("term") != term:
            return                      # an answer to an earlier round
        if message.get("granted") is not True:
            theirs = message.get("current_term")
            if type(theirs) is int and theirs > self._SyncObj__raftCurrentTerm:
                self._SyncObj__setCurrentTerm(theirs, None)
                self._SyncObj__setState(_RAFT_STATE.FOLLOWER)
                self._pre_vote = None
                self._SyncObj__raftElectionDeadline = raft_clock()     # ask again, at the new term
            return
        granted.add(node)
        if len(granted) > (len(self.otherNodes) + 1) / 2 and term == self._SyncObj__raftCurrentTerm + 1:
            self._pre_vote = None
            self._pre_vote_won_in = self._SyncObj__raftCurrentTerm
            self._SyncObj__raftElectionDeadline = 0      # the next tick campaigns
