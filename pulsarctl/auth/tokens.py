"""JSON Web Tokens as Pulsar's AuthenticationProviderToken and `pulsar tokens` make and check them.

A secret key is raw bytes (create-secret-key: 32 random bytes for HS256, 48 for HS384, 64 for
HS512, as jjwt's Keys.secretKeyFor). A token signed with a secret key uses the HMAC algorithm its
length allows, as jjwt's signWith(key) chooses it (32-47 bytes HS256, 48-63 HS384, 64 or more
HS512), and is written as Pulsar writes it: header {"alg":"HS256"} (no "typ"), claims "sub" then
"exp" (seconds) when it expires. Keys are named as Pulsar's tokenSecretKey / --secret-key:
`file:///path` (the file's bytes), `data:;base64,...`, a path that exists, or else the key
itself in base64 (AuthTokenUtils.readKeyFromUrl).

RS256 and the other public-key algorithms need the optional `cryptography` package (PyJWT's
RSA/EC support); without it they are refused with an error that says so. Nothing here reads
the time: the caller passes now_ms (the server its clock, `tokens` the wall clock).
"""
from __future__ import annotations

import base64
import binascii
import os
import secrets
import urllib.parse
import warnings

from pulsarctl.errors import AuthenticationFailed, InvalidValue
from pulsarctl.messages import iso_ms


def _jwt():
    # lazy: PyJWT loads cryptography's x509 (some 50 ms), which serve's start and the commands
    # that never meet a token need not pay for
    import jwt

    return jwt


HMAC = {"HS256": 32, "HS384": 48, "HS512": 64}
PUBLIC_KEY_ALGORITHMS = ("RS256", "RS384", "RS512", "ES256", "ES384", "ES512", "PS256", "PS384",
                         "PS512")
ROLE_CLAIM = "sub"  # tokenAuthClaim's default


def create_secret_key(algorithm: str = "HS256") -> bytes:
    """A new random secret key for an HMAC algorithm (AuthTokenUtils.createSecretKey)."""
    return secrets.token_bytes(HMAC[check_algorithm(algorithm, hmac_only=True)])


def create_key_pair(algorithm: str = "RS256") -> tuple[bytes, bytes]:
    """A new (private, public) key pair for a public-key algorithm, DER-encoded (PKCS#8 and
    X.509 SubjectPublicKeyInfo) as AuthTokenUtils.createKeyPair writes them: RSA 2048 for
    RS*/PS*, the matching curve for ES*."""
    algorithm = check_algorithm(algorithm)
    if algorithm in HMAC:
        raise InvalidValue(f"{algorithm} signs with a secret key, not a key pair",
                           hint="use create-secret-key, or -a RS256 / ES256")
    try:
        # lazy: only public-key algorithms need cryptography
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ec, rsa  # lazy: as above
    except ImportError:
        raise InvalidValue(f"{algorithm} needs the cryptography package",
                           hint="pip install cryptography") from None
    if algorithm.startswith("ES"):
        curve = {"ES256": ec.SECP256R1, "ES384": ec.SECP384R1, "ES512": ec.SECP521R1}[algorithm]
        key = ec.generate_private_key(curve())
    else:
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    public = key.public_key().public_bytes(serialization.Encoding.DER,
                                           serialization.PublicFormat.SubjectPublicKeyInfo)
    return private, public


def check_algorithm(name: str, hmac_only: bool = False) -> str:
    known = tuple(HMAC) + (() if hmac_only else PUBLIC_KEY_ALGORITHMS)
    if name not in known:
        raise InvalidValue(f"unknown signature algorithm {name!r}", hint=f"use one of {', '.join(known)}")
    return name


def read_key(url: str) -> bytes:
    """The key a Pulsar key setting names (AuthTokenUtils.readKeyFromUrl)."""
    if url.startswith("data:"):
        meta, sep, data = url[5:].partition(",")
        if not sep:
            raise InvalidValue(f"the key {_short(url)} is not a data: URL",
                               hint="write it as data:;base64,<the key in base64>")
        if meta.endswith(";base64"):
            return _b64(data, url)
        return urllib.parse.unquote_to_bytes(data)
    if url.startswith("file:"):
        path = urllib.parse.unquote(urllib.parse.urlparse(url).path)
        return _read_file(path)
    if os.path.isfile(url):
        return _read_file(url)
    return _b64(url, url)


def _read_file(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise InvalidValue(f"cannot read the key file {path}: {exc.strerror or exc}",
                           hint="name it as file:///absolute/path") from None


def _b64(text: str, url: str) -> bytes:
    try:
        return base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise InvalidValue(f"the key {_short(url)} is neither a file nor base64",
                           hint="pass file:///PATH, data:;base64,KEY or the key in base64") from None


def _short(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:37] + "...")


def hmac_algorithm(key: bytes) -> str:
    """The HMAC algorithm jjwt signs with for a key of this length; short keys are refused as
    jjwt's WeakKeyException refuses them."""
    if len(key) < 32:
        raise InvalidValue(f"the secret key is {len(key) * 8} bits: an HMAC key needs at least 256",
                           hint="make one with `pulsarctl tokens create-secret-key`")
    return "HS512" if len(key) >= 64 else "HS384" if len(key) >= 48 else "HS256"


def create(key: bytes, subject: str, expires_at_ms: int | None = None, headers: dict | None = None,
           algorithm: str | None = None) -> str:
    """A signed token for subject (AuthTokenUtils.createToken). With a secret key the
    algorithm follows its length; a private key (PEM or DER bytes) needs algorithm (RS256...)."""
    if not subject:
        raise InvalidValue("the subject (the role) must not be empty")
    claims: dict = {"sub": subject}
    if expires_at_ms is not None:
        claims["exp"] = expires_at_ms // 1000
    if algorithm is None or algorithm in HMAC:
        algorithm, signing = hmac_algorithm(key), key
    else:
        signing = _public_key_object(key, algorithm, private=True)
    jwt = _jwt()
    head = {"typ": None, **(headers or {})}  # typ None: PyJWT leaves it out, as jjwt does
    return _jwt_call(jwt.encode, claims, signing, algorithm=check_algorithm(algorithm), headers=head)


def validate(token: str, key: bytes, now_ms: int, algorithm: str | None = None,
             leeway_s: int = 0) -> dict:
    """The claims of a token whose signature matches key and which has not expired at now_ms
    (tokenAllowedClockSkewSeconds is leeway_s); AuthenticationFailed otherwise. A secret key
    checks HS256/384/512 tokens; with algorithm (RS256...) key is a public key."""
    token = token.strip()
    jwt = _jwt()
    try:
        header = jwt.get_unverified_header(token)
    except jwt.exceptions.PyJWTError as exc:
        raise AuthenticationFailed(f"not a valid token: {exc}",
                                   hint="a token is three base64url parts joined by dots") from None
    if algorithm is None or algorithm in HMAC:
        hmac_algorithm(key)
        allowed, verify_key = list(HMAC), key
    else:
        allowed, verify_key = [check_algorithm(algorithm)], _public_key_object(key, algorithm, False)
    if header.get("alg") not in allowed:
        raise AuthenticationFailed(f"the token is signed with {header.get('alg')!r}, the key "
                                   f"checks {', '.join(allowed)}",
                                   hint="validate it with the key it was signed with")
    try:
        claims = _jwt_call(jwt.decode, token, verify_key, algorithms=allowed,
                           options={"verify_exp": False, "verify_sub": False})
    except jwt.exceptions.InvalidSignatureError:
        raise AuthenticationFailed("the token's signature does not match the key",
                                   hint="validate it with the key it was signed with") from None
    except jwt.exceptions.PyJWTError as exc:
        raise AuthenticationFailed(f"not a valid token: {exc}") from None
    exp = claims.get("exp")
    if exp is not None:
        if isinstance(exp, bool) or not isinstance(exp, (int, float)):
            raise AuthenticationFailed(f"the token's exp claim {exp!r} is not a time")
        if now_ms >= (exp + leeway_s) * 1000:
            raise AuthenticationFailed(
                f"the token expired at {_iso(exp * 1000)} (now {_iso(now_ms)})",
                hint="create a new one with `pulsarctl tokens create`")
    return claims


def subject(token: str, key: bytes, now_ms: int, algorithm: str | None = None,
            role_claim: str = ROLE_CLAIM, leeway_s: int = 0) -> str:
    """The role a valid token authenticates (AuthenticationProviderToken.authenticate): its
    role claim ("sub" unless tokenAuthClaim says otherwise). A "Bearer " prefix, as the
    HTTP Authorization header carries it, is taken off."""
    if token.startswith("Bearer "):
        token = token[len("Bearer "):]
    claims = validate(token, key, now_ms, algorithm, leeway_s)
    role = claims.get(role_claim)
    if not isinstance(role, str) or not role:
        raise AuthenticationFailed(f"the token has no {role_claim!r} claim naming a role")
    return role


def decode_unverified(token: str) -> tuple[dict, dict]:
    """The header and claims of a token, unchecked (`tokens show`)."""
    jwt = _jwt()
    try:
        return (jwt.get_unverified_header(token.strip()),
                jwt.decode(token.strip(), options={"verify_signature": False}))
    except jwt.exceptions.PyJWTError as exc:
        raise AuthenticationFailed(f"not a valid token: {exc}",
                                   hint="a token is three base64url parts joined by dots") from None


def claims_text(claims: dict) -> str:
    """The claims as `pulsar tokens validate` prints them (jjwt's Claims.toString)."""
    return "{" + ", ".join(f"{k}={v}" for k, v in claims.items()) + "}"


def _public_key_object(key: bytes, algorithm: str, private: bool):
    try:
        from cryptography.hazmat.primitives import serialization  # lazy: optional package
    except ImportError:
        raise InvalidValue(f"{algorithm} needs the cryptography package",
                           hint="pip install cryptography, or sign with a secret key (HS256)") from None
    load = (serialization.load_pem_private_key if private else serialization.load_pem_public_key) \
        if key.lstrip().startswith(b"-----") else \
        (serialization.load_der_private_key if private else serialization.load_der_public_key)
    try:
        return load(key, None) if private else load(key)
    except (ValueError, TypeError) as exc:
        raise InvalidValue(f"not a {'private' if private else 'public'} key for {algorithm}: {exc}") from None


def _jwt_call(fn, *args, **kwargs):
    # PyJWT warns about short HMAC keys; ours are checked above and a warning must not add a
    # second line to a command's stderr.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


def _iso(ms: int) -> str:
    return iso_ms(ms) or "1970-01-01T00:00:00.000Z"
