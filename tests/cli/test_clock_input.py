"""The clock refuses what it cannot show (issue 14, item 3): a time or a move past
9999-12-31T23:59:59.999Z is exit 2 with one line, and nothing is saved; a bad clock an older
version saved is said as such by `clock show`, with the way out."""
from __future__ import annotations

import pytest

from cli_helpers import assert_error, ok, pjson

AT = "2026-01-01T00:00:00Z"


def _show(cli) -> dict:
    return pjson(cli("clock", "show", "-o", "json"))


@pytest.mark.parametrize("at", ["99999999999999999", "253402300800000",
                                "99999999999999999999999999"])
def test_simulate_at_a_time_past_year_9999_is_refused_and_saves_nothing(cli, at):
    ok(cli("clock", "simulate", "--at", AT))
    before = _show(cli)
    line = assert_error(cli("clock", "simulate", "--at", at), 2)
    assert "after 9999-12-31T23:59:59.999Z" in line
    assert _show(cli) == before
    assert ok(cli("clock", "show")).stdout == "simulated 2026-01-01T00:00:00.000Z\n"


def test_simulate_on_the_real_clock_is_refused_without_switching(cli):
    before = _show(cli)["mode"]
    assert_error(cli("clock", "simulate", "--at", "99999999999999999"), 2)
    assert before == _show(cli)["mode"] == "real"


def test_the_last_time_a_clock_can_show_is_accepted(cli):
    ok(cli("clock", "simulate", "--at", "253402300799999"))
    assert _show(cli)["now"] == "9999-12-31T23:59:59.999Z"
    line = assert_error(cli("clock", "advance", "1ms"), 2)
    assert "past 9999-12-31T23:59:59.999Z" in line
    assert _show(cli)["nowMillis"] == 253402300799999


@pytest.mark.parametrize("duration", ["99999999999999d", "9999999d", "9" * 400, "9" * 400 + "w"])
def test_advance_by_more_than_a_clock_can_count_is_refused_and_saves_nothing(cli, duration):
    ok(cli("clock", "simulate", "--at", AT))
    line = assert_error(cli("clock", "advance", duration), 2)
    assert "longer than any clock can count" in line
    assert ok(cli("clock", "show")).stdout == "simulated 2026-01-01T00:00:00.000Z\n"


def test_advance_past_year_9999_is_refused_and_saves_nothing(cli):
    ok(cli("clock", "simulate", "--at", AT))
    line = assert_error(cli("clock", "advance", "2930000d"), 2)   # about 8020 years
    assert line.startswith("error: the clock cannot move past 9999-12-31T23:59:59.999Z")
    assert _show(cli)["now"] == "2026-01-01T00:00:00.000Z"
    ok(cli("clock", "advance", "2000000d"))                        # to 7502: fine
    assert _show(cli)["now"].startswith("7501-")


def test_a_time_past_9999_is_refused_for_messages_too(cli):
    line = assert_error(cli("produce", "t", "-m", "x", "--deliver-at", "99999999999999999"), 2)
    assert "after 9999-12-31T23:59:59.999Z" in line
    assert_error(cli("topics", "stats", "t"), 3)                  # nothing was created


def test_the_epoch_itself_shows_as_a_time(cli):
    ok(cli("clock", "simulate", "--at", "0"))
    assert ok(cli("clock", "show")).stdout == "simulated 1970-01-01T00:00:00.000Z\n"


def test_clock_show_says_what_is_wrong_with_a_bad_saved_clock(cli, store_path):
    """A clock an older version saved past year 9999: `clock show` says so and how to get
    out; `clock real` and `clock simulate --at` do get out."""
    from pulsarctl.broker import Broker

    b = Broker(store_path)
    b._write(lambda ctx: b.env.put(ctx.txn, "meta", b"clock",
                                  {"mode": "simulated", "at": 99999999999999999}))
    b.close()
    line = assert_error(cli("clock", "show"), 1)
    assert "99999999999999999" in line and "`pulsarctl clock real`" in line
    assert "`pulsarctl clock simulate --at TIME`" in line
    # Simulating on from there would save it again: refused, with --at as the way.
    assert "--at" in assert_error(cli("clock", "simulate"), 2)
    assert_error(cli("clock", "advance", "1s"), 2)
    ok(cli("clock", "simulate", "--at", AT))
    assert ok(cli("clock", "show")).stdout == "simulated 2026-01-01T00:00:00.000Z\n"
    b = Broker(store_path)
    b._write(lambda ctx: b.env.put(ctx.txn, "meta", b"clock",
                                  {"mode": "simulated", "at": 99999999999999999}))
    b.close()
    ok(cli("clock", "real"))
    assert _show(cli)["mode"] == "real"
