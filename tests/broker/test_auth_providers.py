"""pulsarctl/auth: the token provider (create, validate, subject) and the htpasswd reader, as
Pulsar's AuthenticationProviderToken and AuthenticationProviderBasic accept credentials."""
from __future__ import annotations

import pytest

from pulsarctl.auth import basic, tokens
from pulsarctl.errors import AuthenticationFailed, InvalidValue

KEY = bytes(range(32))


def test_subject_of_a_valid_token_and_the_bearer_prefix():
    tok = tokens.create(KEY, "alice", expires_at_ms=10_000)
    assert tokens.subject(tok, KEY, now_ms=9_999) == "alice"
    assert tokens.subject("Bearer " + tok, KEY, now_ms=0) == "alice"
    with pytest.raises(AuthenticationFailed, match="expired"):
        tokens.subject(tok, KEY, now_ms=10_000)
    with pytest.raises(AuthenticationFailed, match="signature"):
        tokens.subject(tok, bytes(32), now_ms=0)


def test_the_algorithm_follows_the_key_length_as_jjwt():
    for size, alg in ((32, "HS256"), (48, "HS384"), (64, "HS512")):
        tok = tokens.create(b"k" * size, "r")
        assert tokens.decode_unverified(tok)[0] == {"alg": alg}
        assert tokens.validate(tok, b"k" * size, 0) == {"sub": "r"}
    with pytest.raises(InvalidValue, match="at least 256"):
        tokens.create(b"short", "r")


def test_a_token_of_another_algorithm_is_refused():
    none_token = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhZG1pbiJ9."  # alg none: never accepted
    with pytest.raises(AuthenticationFailed):
        tokens.subject(none_token, KEY, 0)


def test_read_key_forms(tmp_path):
    (tmp_path / "k").write_bytes(KEY)
    import base64
    b64 = base64.b64encode(KEY).decode()
    assert tokens.read_key(f"file://{tmp_path / 'k'}") == KEY
    assert tokens.read_key(str(tmp_path / "k")) == KEY
    assert tokens.read_key(f"data:;base64,{b64}") == KEY
    assert tokens.read_key(b64) == KEY


HTPASSWD = """# made with htpasswd -m and openssl passwd
alice:$apr1$abcdefgh$h9FWgUz3n9YxylKLlR5SQ/
bob:$1$xyz$Qia9Wq6FxQkYcwNWMk/RM0
carol:$apr1$Zq$hp8E/a3BPEYEkEIK90Om80
"""


def test_basic_auth_checks_apr1_and_md5_crypt(tmp_path):
    (tmp_path / "users").write_text(HTPASSWD)
    auth = basic.BasicAuth.from_file(str(tmp_path / "users"))
    assert auth.check("alice", "secret") == "alice"
    assert auth.check("bob", "secret") == "bob"
    assert auth.check("carol", "secret") == "carol"
    with pytest.raises(AuthenticationFailed, match="wrong password"):
        auth.check("alice", "Secret")
    with pytest.raises(AuthenticationFailed, match="unknown user"):
        auth.check("dave", "secret")


def test_basic_auth_refuses_what_pulsar_refuses(tmp_path):
    auth = basic.BasicAuth({"eve": "$2y$05$abcdefghijklmnopqrstuu"})
    with pytest.raises(InvalidValue, match="not supported"):
        auth.check("eve", "x")
    with pytest.raises(InvalidValue, match="not user:hash"):
        basic.parse("no-colon-here\n")
    with pytest.raises(InvalidValue, match="cannot read"):
        basic.BasicAuth.from_file(str(tmp_path / "missing"))
