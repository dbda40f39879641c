"""`pulsarctl tokens` as `pulsar tokens` (TokensCliUtils): secret keys, HS256 tokens as Pulsar
writes them, validate's exit 8 and one error line on a bad signature or an expired token."""
from __future__ import annotations

import base64
import json

from cli_helpers import assert_error, ok, pjson


def _part(token: str, i: int) -> dict:
    seg = token.split(".")[i]
    return json.loads(base64.urlsafe_b64decode(seg + "=" * (-len(seg) % 4)))


def _key(cli, tmp_path, name="k.bin"):
    path = tmp_path / name
    ok(cli("tokens", "create-secret-key", "--output", str(path)))
    return path


def test_create_secret_key_writes_32_raw_bytes_or_base64(cli, tmp_path):
    path = _key(cli, tmp_path)
    assert len(path.read_bytes()) == 32
    assert path.stat().st_mode & 0o077 == 0, "a secret key is readable by its owner only"
    printed = ok(cli("tokens", "create-secret-key", "--base64")).stdout
    assert len(base64.b64decode(printed, validate=True)) == 32
    ok(cli("tokens", "create-secret-key", "-b", "--output", str(tmp_path / "k64")))
    assert len(base64.b64decode((tmp_path / "k64").read_bytes())) == 32
    ok(cli("tokens", "create-secret-key", "-b", "-a", "HS512", "--output", str(tmp_path / "k5")))
    assert len(base64.b64decode((tmp_path / "k5").read_bytes())) == 64


def test_create_writes_pulsars_hs256_token(cli, tmp_path):
    key = _key(cli, tmp_path)
    token = ok(cli("tokens", "create", "--secret-key", f"file://{key}", "--subject", "alice"))\
        .stdout.strip()
    assert token.split(".")[0] == "eyJhbGciOiJIUzI1NiJ9"  # {"alg":"HS256"}, exactly
    assert _part(token, 1) == {"sub": "alice"}
    r = ok(cli("tokens", "validate", "-sk", f"file://{key}", token))
    assert r.stdout == "{sub=alice}\n"


def test_expiry_headers_and_data_urls(cli, tmp_path):
    b64 = ok(cli("tokens", "create-secret-key", "-b")).stdout.strip()
    url = f"data:;base64,{b64}"
    token = ok(cli("tokens", "create", "-sk", url, "-s", "bob", "-e", "30d",
                   "--headers", "kid=one")).stdout.strip()
    assert _part(token, 0) == {"alg": "HS256", "kid": "one"}
    claims = _part(token, 1)
    assert list(claims) == ["sub", "exp"] and claims["sub"] == "bob"
    doc = pjson(cli("-o", "json", "tokens", "validate", "-sk", b64, token))
    assert doc == claims
    assert pjson(cli("-o", "json", "tokens", "show", token)) == {
        "header": {"alg": "HS256", "kid": "one"}, "claims": claims}


def test_validate_reads_the_token_from_stdin_a_file_or_TOKEN(cli, tmp_path, monkeypatch):
    key = _key(cli, tmp_path)
    token = ok(cli("tokens", "create", "-sk", str(key), "-s", "carol")).stdout.strip()
    assert ok(cli("tokens", "validate", "-sk", str(key), "-i", input=token + "\n")).stdout \
        == "{sub=carol}\n"
    (tmp_path / "tok").write_text(token + "\n")
    assert ok(cli("tokens", "validate", "-sk", str(key), "-f", str(tmp_path / "tok"))).stdout \
        == "{sub=carol}\n"
    monkeypatch.setenv("TOKEN", token)
    assert ok(cli("tokens", "validate", "-sk", str(key))).stdout == "{sub=carol}\n"
    monkeypatch.delenv("TOKEN")
    assert "no token given" in assert_error(cli("tokens", "validate", "-sk", str(key)), 2)


def test_a_bad_signature_is_exit_8_and_one_line(cli, tmp_path):
    key, other = _key(cli, tmp_path), _key(cli, tmp_path, "other.bin")
    token = ok(cli("tokens", "create", "-sk", str(key), "-s", "alice")).stdout.strip()
    line = assert_error(cli("tokens", "validate", "-sk", str(other), token), 8, stdout_empty=True)
    assert "signature does not match" in line
    tampered = token[:-3] + ("AAA" if not token.endswith("AAA") else "BBB")
    assert_error(cli("tokens", "validate", "-sk", str(key), tampered), 8, stdout_empty=True)
    assert "not a valid token" in assert_error(cli("tokens", "validate", "-sk", str(key), "x.y"), 8)


def test_an_expired_token_is_exit_8(cli, tmp_path, monkeypatch):
    key = _key(cli, tmp_path)
    token = ok(cli("tokens", "create", "-sk", str(key), "-s", "alice", "-e", "1h")).stdout.strip()
    from pulsarctl.cli import tokens_cmd
    real = tokens_cmd.wall_ms
    monkeypatch.setattr(tokens_cmd, "wall_ms", lambda: real() + 2 * 3600_000)
    line = assert_error(cli("tokens", "validate", "-sk", str(key), token), 8, stdout_empty=True)
    assert "expired at" in line


def test_bad_inputs_are_usage_errors(cli, tmp_path):
    key = _key(cli, tmp_path)
    for argv, words in (
        (("tokens", "create", "-s", "a"), "no key"),
        (("tokens", "create", "-sk", str(key), "-s", "a", "-e", "soon"), "invalid expiry time"),
        (("tokens", "create", "-sk", "not base64!", "-s", "a"), "neither a file nor base64"),
        (("tokens", "create", "-sk", "file:///nonexistent/k", "-s", "a"), "cannot read the key"),
        (("tokens", "create", "-sk", "data:;base64,c2hvcnQ=", "-s", "a"), "at least 256"),
        (("tokens", "create", "-sk", str(key), "-s", "a", "--headers", "nokv"), ""),
        (("tokens", "create-secret-key", "-a", "RS256"), "unknown signature algorithm"),
        (("tokens", "validate", "x"), "no key"),
    ):
        assert words in assert_error(cli(*argv), 2, stdout_empty=True), argv


def test_rs256_key_pair_signs_and_checks(cli, tmp_path):
    priv, pub = tmp_path / "private.key", tmp_path / "public.key"
    ok(cli("tokens", "create-key-pair", "--output-private-key", str(priv),
           "--output-public-key", str(pub)))
    assert priv.stat().st_mode & 0o077 == 0
    assert priv.read_bytes()[:1] == b"\x30" and pub.read_bytes()[:1] == b"\x30"   # DER
    token = ok(cli("tokens", "create", "--private-key", f"file://{priv}", "-s", "bob")).stdout.strip()
    assert token.split(".")[0] == "eyJhbGciOiJSUzI1NiJ9"   # {"alg":"RS256"}
    assert ok(cli("tokens", "validate", "--public-key", f"file://{pub}", token)).stdout == "{sub=bob}\n"
    other_priv, other_pub = tmp_path / "o.key", tmp_path / "o.pub"
    ok(cli("tokens", "create-key-pair", "--output-private-key", str(other_priv),
           "--output-public-key", str(other_pub)))
    line = assert_error(cli("tokens", "validate", "-pk", str(other_pub), token), 8, stdout_empty=True)
    assert "signature does not match" in line
    assert_error(cli("tokens", "create", "-s", "x"), 2)                       # no key at all
    assert_error(cli("tokens", "create-key-pair", "--output-private-key", str(tmp_path / "a"),
                     "--output-public-key", str(tmp_path / "b"), "-a", "HS256"), 2)
