"""consume and receive take their flags from one declaration (pulsarctl/cli/consume_options.py)
and hand their loop one ConsumeOptions, every flag checked before anything is written."""
from __future__ import annotations

from pulsarctl.cli.app import command
from pulsarctl.cli.consume_options import CONSUME, POLICY, RECEIVE

from cli_helpers import assert_error, ok


def _params(name):
    return [p.name for p in command().commands[name].params]


def test_the_commands_take_the_declared_flags_in_order():
    assert _params("consume") == [p.name for p in CONSUME]
    assert _params("receive") == [p.name for p in RECEIVE]


def test_consume_and_receive_share_every_flag_but_their_own():
    consume, receive = set(_params("consume")), set(_params("receive"))
    assert consume - receive == {"exec_cmd", "exec_retry_delay"}
    assert receive - consume == {"lease"}
    assert {p.name for p in POLICY} <= consume & receive


def test_a_bad_exec_retry_delay_is_refused_before_the_subscription_is_made(cli):
    ok(cli("produce", "t", "-m", "x"))
    line = assert_error(cli("consume", "t", "-s", "s", "--exec", "true",
                            "--exec-retry-delay", "zzz", "--idle-timeout", "1ms"), 2)
    assert "--exec-retry-delay" in line
    assert ok(cli("topics", "subscriptions", "t", "-o", "json")).stdout.strip() == "[]"
