"""pulsar tokens: secret keys and JSON Web Tokens (Pulsar's TokensCliUtils). No store is opened."""
from __future__ import annotations

import base64
import os
from typing import Annotated, List, Optional

import typer

from pulsarctl.cli import render
from pulsarctl.cli.common import fmt
from pulsarctl.clock import wall_ms
from pulsarctl.errors import InvalidValue

tokens = typer.Typer(help="Secret keys and tokens for token authentication (pulsar tokens).",
                     no_args_is_help=True)

Algorithm = Annotated[str, typer.Option("-a", "--signature-algorithm", metavar="ALG",
                                        help="HS256, HS384 or HS512.")]
PairAlgorithm = Annotated[str, typer.Option("-a", "--signature-algorithm", metavar="ALG",
                                            help="RS256, RS384, RS512, ES256, ES384 or ES512.")]
SignAlgorithm = Annotated[Optional[str], typer.Option(
    "-a", "--signature-algorithm", metavar="ALG", show_default=False,
    help="With a private or public key: RS256 (default), ES256, ...; with a secret key the "
    "key's length chooses HS256/384/512.")]
PrivateKey = Annotated[Optional[str], typer.Option(
    "-pk", "--private-key", metavar="KEY", show_default=False,
    help="Sign with this private key (file:///PATH, data:;base64,KEY or a path; DER or PEM).")]
PublicKey = Annotated[Optional[str], typer.Option(
    "-pk", "--public-key", metavar="KEY", show_default=False,
    help="Check with this public key (file:///PATH, data:;base64,KEY or a path; DER or PEM).")]
SecretKey = Annotated[Optional[str], typer.Option(
    "-sk", "--secret-key", metavar="KEY", show_default=False,
    help="The secret key: file:///PATH, data:;base64,KEY, a path, or the key in base64.")]
TokenArg = Annotated[Optional[str], typer.Argument(help="The token (or -i, -f, $TOKEN).",
                                                   show_default=False)]
Stdin = Annotated[bool, typer.Option("-i", "--stdin", help="Read the token from standard input.")]
TokenFile = Annotated[Optional[str], typer.Option("-f", "--token-file", metavar="FILE",
                                                  help="Read the token from a file.",
                                                  show_default=False)]


@tokens.command("create-secret-key", help="Create a new secret key (raw bytes; --base64 to "
                "print it as text).")
def create_secret_key(
    output: Annotated[Optional[str], typer.Option(
        "--output", metavar="FILE", show_default=False,
        help="Write the key to FILE instead of stdout.")] = None,
    base64_: Annotated[bool, typer.Option("-b", "--base64", help="Encode the key in base64.")] = False,
    algorithm: Algorithm = "HS256",
):
    # lazy: PyJWT is loaded when a tokens command runs, not when the command tree is built
    from pulsarctl.auth import tokens as auth_tokens

    auth_tokens.check_algorithm(algorithm, hmac_only=True)
    key = auth_tokens.create_secret_key(algorithm)
    data = base64.b64encode(key) if base64_ else key
    if output is None:
        render.out_bytes(data)
        return
    _write_private(output, data, "key")


@tokens.command("create-key-pair", help="Create a private and public key pair for RS256 "
                "(or ES256...) tokens: the private key signs, the broker's tokenPublicKey "
                "checks.")
def create_key_pair(
    output_private_key: Annotated[str, typer.Option(
        "--output-private-key", metavar="FILE", show_default=False,
        help="Write the private key (DER, PKCS#8) to FILE.")],
    output_public_key: Annotated[str, typer.Option(
        "--output-public-key", metavar="FILE", show_default=False,
        help="Write the public key (DER, X.509) to FILE.")],
    algorithm: PairAlgorithm = "RS256",
):
    # lazy: PyJWT is loaded when a tokens command runs, not when the command tree is built
    from pulsarctl.auth import tokens as auth_tokens

    private, public = auth_tokens.create_key_pair(algorithm)
    _write_private(output_private_key, private, "private key")
    _write_private(output_public_key, public, "public key")


def _write_private(path: str, data: bytes, what: str) -> None:
    """data into a new file at path that only its owner may read (0600), as keys are kept."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
    except OSError as exc:
        raise InvalidValue(f"cannot write the {what} to {path}: {exc.strerror or exc}") from None


def _key_and_algorithm(secret_key, pair_key, algorithm, flag: str, verb: str):
    """(key bytes, algorithm) from --secret-key or the key pair's half given with flag
    (--private-key to sign, --public-key to check), exactly one of them; algorithm None for
    a secret key (its length chooses HS256/384/512)."""
    # lazy: PyJWT is loaded when a tokens command runs, not when the command tree is built
    from pulsarctl.auth import tokens as auth_tokens

    if not secret_key and not pair_key:
        raise InvalidValue(f"no key to {verb} the token with",
                           hint=f"pass --secret-key or {flag}")
    if secret_key and pair_key:
        raise InvalidValue(f"give one key to {verb} with, not two",
                           hint=f"pass --secret-key or {flag}")
    if secret_key:
        return auth_tokens.read_key(secret_key), None
    alg = auth_tokens.check_algorithm(algorithm or "RS256")
    if alg in auth_tokens.HMAC:
        raise InvalidValue(f"{alg} signs with a secret key", hint="pass --secret-key")
    return auth_tokens.read_key(pair_key), alg


def _read_token(token: str | None, stdin: bool, token_file: str | None) -> str:
    if token:
        return token
    if stdin:
        line = render.read_stdin_line()
        if line.strip():
            return line.strip()
    elif token_file:
        try:
            with open(token_file, encoding="utf-8") as f:
                return f.read().strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidValue(f"cannot read the token file {token_file}: "
                               f"{getattr(exc, 'strerror', None) or exc}") from None
    elif os.environ.get("TOKEN"):
        return os.environ["TOKEN"]
    raise InvalidValue("no token given", hint="pass it as an argument, or with --stdin, "
                       "--token-file or the TOKEN environment variable")


def _headers(values: list[str] | None) -> dict:
    # lazy: units is loaded when the command runs, not when the command tree is built
    from pulsarctl.units import parse_property

    return dict(parse_property(v) for v in values or ())


@tokens.command("create", help="Create a token signed with a secret key (HS256 for a key of "
                "32 bytes) or a private key (RS256, ES256...).")
def create(
    ctx: typer.Context,
    subject: Annotated[str, typer.Option("-s", "--subject", metavar="ROLE", show_default=False,
                                         help="The role the token authenticates ('sub').")],
    secret_key: SecretKey = None,
    private_key: PrivateKey = None,
    algorithm: SignAlgorithm = None,
    expiry_time: Annotated[Optional[str], typer.Option(
        "-e", "--expiry-time", metavar="DURATION", show_default=False,
        help="Expire after this long (1h, 30d, 1y; s, m, h, d, w, y). Default: never.")] = None,
    headers: Annotated[Optional[List[str]], typer.Option(
        "--headers", metavar="KEY=VALUE", show_default=False,
        help="A header to add to the token (repeatable).")] = None,
):
    # lazy: PyJWT is loaded when a tokens command runs, not when the command tree is built
    from pulsarctl.auth import tokens as auth_tokens

    extra = _headers(headers)
    expires = None if expiry_time is None else wall_ms() + parse_relative_ms(expiry_time)
    key, alg = _key_and_algorithm(secret_key, private_key, algorithm, "--private-key", "sign")
    token = auth_tokens.create(key, subject, expires, extra, algorithm=alg)
    out = fmt(ctx, None)
    render.data({"token": token}, out, text=lambda d: render.outln(d["token"]))


@tokens.command("validate", short_help="Check a token against a secret or public key and show "
                "its claims (exit 8 if it is bad).", help="Check a token against a secret key or a public key and show "
                "its claims (exit 8 if its signature does not match or it has expired).")
def validate(ctx: typer.Context, token: TokenArg = None, secret_key: SecretKey = None,
             public_key: PublicKey = None, algorithm: SignAlgorithm = None,
             stdin: Stdin = False, token_file: TokenFile = None):
    # lazy: PyJWT is loaded when a tokens command runs, not when the command tree is built
    from pulsarctl.auth import tokens as auth_tokens

    key, alg = _key_and_algorithm(secret_key, public_key, algorithm, "--public-key", "check")
    claims = auth_tokens.validate(_read_token(token, stdin, token_file), key, wall_ms(), alg)
    render.data(claims, fmt(ctx, None),
                text=lambda d: render.outln(render.safe(auth_tokens.claims_text(d))))


@tokens.command("show", help="Show a token's header and claims, without checking it.")
def show(ctx: typer.Context, token: TokenArg = None, stdin: Stdin = False,
         token_file: TokenFile = None):
    # lazy: PyJWT is loaded when a tokens command runs, not when the command tree is built
    from pulsarctl.auth import tokens as auth_tokens

    header, claims = auth_tokens.decode_unverified(_read_token(token, stdin, token_file))

    def text(d):
        render.outln(render.safe(render.dumps(d["header"], pretty=False)))
        render.outln("---")
        render.outln(render.safe(render.dumps(d["claims"], pretty=False)))

    render.data({"header": header, "claims": claims}, fmt(ctx, None), text=text)


_RELATIVE_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400, "y": 365 * 86400}


def parse_relative_ms(text: str) -> int:
    """Pulsar's RelativeTimeUtil: a whole number and a unit (s, m, h, d, w, y; seconds without)."""
    t = text.strip().lower()
    unit = t[-1:] if t[-1:] in _RELATIVE_S else "s"
    number = t[:-1] if t[-1:] in _RELATIVE_S else t
    if not number.isdigit() or int(number) <= 0:
        raise InvalidValue(f"invalid expiry time {text!r}",
                           hint="use a positive number and a unit: 30m, 12h, 30d, 1y")
    return int(number) * _RELATIVE_S[unit] * 1000
