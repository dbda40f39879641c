"""Durable cursors (store/cursor.py): a hypothesis state machine against a set model, plus
targeted tests of seek, skip, cumulative ack and persistence. Real LMDB in tmp_path."""
from __future__ import annotations

from hypothesis import HealthCheck, settings, strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine, initialize, invariant, precondition, rule, run_state_machine_as_test,
)

from store import Cursors, Env
from store.cursor import CursorState

ML = 7


def first_gap(acked: set) -> int:
    o = 0
    while o in acked:
        o += 1
    return o


class CursorMachine(RuleBasedStateMachine):
    """The model: `published` entries (offsets 0..published-1) and the set of acked offsets.
    Each rule runs in its own write transaction and loads the cursor from the store, so the
    state that matters has to be durable."""

    env: Env = None  # set by the test
    counter = 0

    def __init__(self):
        super().__init__()
        self.cursors = Cursors(self.env)
        CursorMachine.counter += 1
        self.name = f"sub-{CursorMachine.counter}"
        self.published = 0
        self.acked: set[int] = set()
        self.last_md = None
        self.seeked = False

    # -- helpers ---------------------------------------------------------------------------
    def load(self, txn) -> CursorState:
        c = self.cursors.get(txn, ML, self.name)
        assert c is not None
        return c

    def apply(self, fn):
        def body(txn):
            c = self.load(txn)
            out = fn(txn, c)
            self.cursors.save(txn, c)
            return out
        return self.env.write(body)

    # -- rules -----------------------------------------------------------------------------
    @initialize(published=st.integers(0, 30), latest=st.booleans())
    def create(self, published, latest):
        self.published = published
        md = published - 1 if latest else -1      # Latest / Earliest
        self.acked = set(range(md + 1))
        self.env.write(lambda txn: self.cursors.create(txn, ML, self.name, md))

    @rule(n=st.integers(1, 15))
    def publish(self, n):
        self.published += n

    @precondition(lambda self: self.published > 0)
    @rule(data=st.data())
    def ack(self, data):
        offs = data.draw(st.lists(st.integers(0, self.published - 1), max_size=12))
        expected = len(set(offs) - self.acked)
        newly = self.apply(lambda txn, c: self.cursors.ack(txn, c, offs))
        assert newly == expected
        self.acked |= set(offs)

    @precondition(lambda self: self.published > 0)
    @rule(data=st.data())
    def ack_range(self, data):
        a = data.draw(st.integers(0, self.published - 1))
        b = data.draw(st.integers(a, self.published - 1))
        offs = list(range(b, a - 1, -1))          # descending: order must not matter
        expected = len(set(offs) - self.acked)
        assert self.apply(lambda txn, c: self.cursors.ack(txn, c, offs)) == expected
        self.acked |= set(offs)

    @rule(data=st.data())
    def ack_cumulative(self, data):
        o = data.draw(st.integers(-1, self.published - 1))
        expected = len(set(range(o + 1)) - self.acked)
        assert self.apply(lambda txn, c: self.cursors.ack_cumulative(txn, c, o)) == expected
        self.acked |= set(range(o + 1))

    @rule(n=st.integers(0, 10))
    def skip(self, n):
        todo = [o for o in range(self.published) if o not in self.acked][:n]
        got = self.apply(lambda txn, c: self.cursors.skip(txn, c, n, self.published))
        assert got == len(todo)
        self.acked |= set(todo)

    @rule(data=st.data())
    def seek(self, data):
        md = data.draw(st.integers(-1, self.published - 1))
        self.apply(lambda txn, c: self.cursors.seek(txn, c, md))
        self.acked = set(range(md + 1))
        self.seeked = True

    @rule(data=st.data())
    def read_some(self, data):
        """A consumer reads from the read position: it gets unacked offsets only, in order."""
        n = data.draw(st.integers(1, 10))

        def body(txn, c):
            got = []
            for o in self.cursors.unacked(txn, c, c.read_position, self.published):
                got.append(o)
                if len(got) >= n:
                    break
            if got:
                c.read_position = got[-1] + 1
            return got
        got = self.apply(body)
        assert all(o not in self.acked for o in got)
        assert got == sorted(got)

    # -- invariants --------------------------------------------------------------------------
    @invariant()
    def matches_model(self):
        with self.env.read() as txn:
            c = self.load(txn)
            md = c.mark_delete
            # Mark-delete is the highest offset at and below which everything is acked.
            assert md == first_gap(self.acked) - 1
            # It never moves back, except through an explicit seek.
            if self.last_md is not None and not self.seeked:
                assert md >= self.last_md
            self.last_md, self.seeked = md, False
            # Acked and backlog partition the published entries, and backlog is O(1) counters.
            acked_published = len([o for o in self.acked if o < self.published])
            assert c.backlog(self.published) == self.published - acked_published
            assert c.acked_above == len(self.acked) - (md + 1)
            # Individually deleted ranges lie strictly above mark-delete (not even adjacent,
            # or they would have been folded in), sorted and disjoint, and hold the rest.
            ranges = self.cursors.individually_deleted(txn, c)
            covered = set()
            prev_end = md
            for s, e in ranges:
                assert s > prev_end + 1, (md, ranges)
                assert e >= s
                covered.update(range(s, e + 1))
                prev_end = e
            assert covered == {o for o in self.acked if o > md}
            # Iterating unacked entries skips every acked range.
            assert list(self.cursors.unacked(txn, c, 0, self.published)) == [
                o for o in range(self.published) if o not in self.acked]
            for o in range(self.published + 2):
                assert self.cursors.is_acked(txn, c, o) == (o in self.acked)


def test_cursor_state_machine(tmp_path):
    env = Env(str(tmp_path / "store"))
    CursorMachine.env = env
    try:
        run_state_machine_as_test(
            CursorMachine,
            settings=settings(max_examples=120, stateful_step_count=30, deadline=None,
                              suppress_health_check=[HealthCheck.too_slow]))
    finally:
        env.close()


# -- targeted tests ----------------------------------------------------------------------------
def same(a: CursorState, b: CursorState) -> bool:
    return (a.ml_id, a.name) == (b.ml_id, b.name) and a.to_record() == b.to_record()


def make(env, md=-1, name="s"):
    cs = Cursors(env)
    return cs, env.write(lambda txn: cs.create(txn, ML, name, md))


def test_new_cursor_positions(env):
    cs, c = make(env, -1)
    assert (c.mark_delete, c.read_position, c.acked_above) == (-1, 0, 0)
    assert c.backlog(10) == 10
    cs2, latest = make(env, 9, name="latest")
    assert (latest.mark_delete, latest.read_position) == (9, 10)
    assert latest.backlog(10) == 0
    with env.read() as txn:
        assert same(cs.get(txn, ML, "s"), c)
        assert same(cs.get(txn, ML, "latest"), latest)
        assert cs.get(txn, ML, "nope") is None
        assert sorted(x.name for x in cs.list(txn, ML)) == ["latest", "s"]
        assert cs.list(txn, ML + 1) == []
    assert c.id != latest.id


def test_individual_acks_fold_into_mark_delete(env):
    cs, c = make(env)

    def body(txn):
        assert cs.ack(txn, c, [2, 3, 5]) == 3
        assert c.mark_delete == -1
        assert cs.individually_deleted(txn, c) == [(2, 3), (5, 5)]
        assert c.backlog(8) == 5
        assert cs.ack(txn, c, [0]) == 1
        assert c.mark_delete == 0
        assert cs.ack(txn, c, [1]) == 1              # 0..3 contiguous now
        assert c.mark_delete == 3
        assert cs.individually_deleted(txn, c) == [(5, 5)]
        assert c.acked_above == 1
        assert cs.ack(txn, c, [4]) == 1
        assert c.mark_delete == 5 and cs.individually_deleted(txn, c) == []
        assert c.acked_above == 0
        assert cs.ack(txn, c, [4, 5, 0]) == 0          # acking twice is a no-op
        assert c.backlog(8) == 2
        cs.save(txn, c)
    env.write(body)
    with env.read() as txn:
        again = cs.get(txn, ML, "s")
        assert (again.mark_delete, again.acked_above) == (5, 0)


def test_cumulative_ack_counts_and_drops_ranges(env):
    cs, c = make(env)

    def body(txn):
        cs.ack(txn, c, [3, 4, 8, 9, 10])
        assert cs.ack_cumulative(txn, c, 8) == 9 - 3     # 0..8 minus 3, 4, 8
        assert c.mark_delete == 10                        # folds the range that went past 8
        assert cs.individually_deleted(txn, c) == []
        assert c.acked_above == 0
        assert cs.ack_cumulative(txn, c, 5) == 0          # never back
        assert c.mark_delete == 10
        assert c.read_position == 11
        assert c.backlog(20) == 9
    env.write(body)


def test_read_position_never_behind_mark_delete(env):
    """In Pulsar's ManagedCursor the read position is always after mark-delete: moving
    mark-delete past it moves it to markDelete.next. That holds for individual acks too."""
    cs, c = make(env)

    def body(txn):
        cs.ack(txn, c, [0, 1, 2])
        assert c.mark_delete == 2
        assert c.read_position == 3
    env.write(body)


def test_seek_resets_acks(env):
    cs, c = make(env)

    def body(txn):
        cs.ack(txn, c, [0, 1, 5, 6, 9])
        cs.seek(txn, c, 3)
        assert (c.mark_delete, c.read_position, c.acked_above) == (3, 4, 0)
        assert cs.individually_deleted(txn, c) == []
        assert list(cs.unacked(txn, c, 0, 10)) == [4, 5, 6, 7, 8, 9]
        cs.seek(txn, c, -1)                               # back to the start
        assert list(cs.unacked(txn, c, 0, 3)) == [0, 1, 2]
        assert c.backlog(10) == 10
    env.write(body)


def test_skip_excludes_individually_deleted(env):
    cs, c = make(env)

    def body(txn):
        cs.ack(txn, c, [1, 2, 6])
        # The next 3 unacked entries are 0, 3 and 4: skipping them leaves 5 first.
        assert cs.skip(txn, c, 3, 10) == 3
        assert c.mark_delete == 4
        assert list(cs.unacked(txn, c, 0, 10)) == [5, 7, 8, 9]
        assert c.read_position >= 5
        assert cs.skip(txn, c, 100, 10) == 4              # only 4 left
        assert c.mark_delete == 9 and c.backlog(10) == 0
        assert cs.skip(txn, c, 5, 10) == 0
    env.write(body)


def test_unacked_starts_after_mark_delete(env):
    cs, c = make(env, 4)
    with env.read() as txn:
        assert list(cs.unacked(txn, c, 0, 8)) == [5, 6, 7]
        assert list(cs.unacked(txn, c, 6, 8)) == [6, 7]


def test_delete_removes_cursor_and_ranges(env):
    cs, c = make(env)
    _, other = make(env, name="other")

    def body(txn):
        cs.ack(txn, c, [3, 7])
        cs.save(txn, c)
        cs.ack(txn, other, [3])
        cs.save(txn, other)
    env.write(body)
    env.write(lambda txn: cs.delete(txn, c))
    with env.read() as txn:
        assert cs.get(txn, ML, "s") is None
        assert cs.ranges.first(txn, c.id) is None
        assert cs.individually_deleted(txn, other) == [(3, 3)]
