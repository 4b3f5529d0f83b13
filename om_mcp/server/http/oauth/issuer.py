"""A team's own identity provider (`--oauth-issuer URL`): om-mcp as a resource server.

A bearer token is accepted when it is a JWT the provider signed for this server: its signature
checks against a key of the provider's JWKS (found through its discovery document, cached for
`jwks_cache_seconds`, fetched again when a token names a key id not seen yet: keys rotate), with
the algorithm that key is for (an asymmetric one: `alg: none` or an HMAC "signed" with the public
key never verifies), its `iss` is the issuer, its `aud` the resource (or `audience`), and it has
not expired. The identity is one claim (`sub`, `email`, or a list such as `groups`), mapped to
resources by `[server.oauth.identities]`; the resources travel in `RESOURCES_CLAIM` like any
other token's. When the keys cannot be fetched every token is refused (fail closed), and the log
says so in one line until they can be fetched again.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable
from typing import Any

import anyio
import httpx2
import jwt
from mcp.server.auth.provider import AccessToken

from om_mcp.config import OAuthConfig, check_https_url
from om_mcp.server.http.auth import ALL_RESOURCES, RESOURCES_CLAIM

log = logging.getLogger(__name__)

ASYMMETRIC = {"RSA", "EC", "OKP"}  # a provider never publishes a symmetric key; one that does is ignored
REFETCH_UNKNOWN_KID_SECONDS = 30.0  # a token naming a new key id fetches the keys at most this often
FETCH_TIMEOUT_SECONDS = 10.0
MAX_DOCUMENT_BYTES = 512 * 1024
LEEWAY_SECONDS = 30  # clock skew between the provider and this machine


class KeysUnavailable(Exception):
    """The provider's discovery document or JWKS could not be fetched or read."""


class IssuerTokens:
    """The `TokenVerifier` of an external OpenID provider's JWT access tokens."""

    def __init__(
        self,
        settings: OAuthConfig,
        audience: str,
        *,
        clock: Callable[[], float] = time.time,
        leeway: float = LEEWAY_SECONDS,
    ) -> None:
        assert settings.issuer is not None
        self.issuer = settings.issuer
        self.audience = settings.audience or audience
        self.claim = settings.claim
        self.identities = settings.identities
        self.cache_seconds = settings.jwks_cache_seconds
        self.clock, self.leeway = clock, leeway
        self._keys: dict[str | None, jwt.PyJWK] = {}
        self._fetched_at = self._attempted_at = float("-inf")
        self._lock = anyio.Lock()
        self._failing: str | None = None  # the error of the current run of failed fetches, logged once
        self._unmapped: set[str] = set()  # identities already logged as mapped to nothing

    async def verify_token(self, token: str) -> AccessToken | None:
        if token.count(".") != 2:
            return None  # not a JWT: another verifier's
        try:
            header = jwt.get_unverified_header(token)
        except jwt.InvalidTokenError:
            return None
        kid = header.get("kid")
        key = await self._key(kid if isinstance(kid, str) else None)
        if key is None:
            return None
        if header.get("alg") != key.algorithm_name:
            log.debug("a JWT signed with %r against a %r key: refused", header.get("alg"), key.algorithm_name)
            return None
        try:
            claims = jwt.decode(
                token,
                key.key,
                algorithms=[key.algorithm_name],
                audience=self.audience,
                issuer=self.issuer,
                leeway=self.leeway,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.InvalidTokenError as error:
            log.debug("a JWT refused: %s", error)
            return None
        return self._access(token, claims)

    def _access(self, token: str, claims: dict[str, Any]) -> AccessToken:
        identity = claims.get(self.claim)
        values = [str(v) for v in (identity if isinstance(identity, list) else [identity]) if v is not None]
        resources: list[str] = []
        for value in [*values, ALL_RESOURCES]:
            for resource in self.identities.get(value, []):
                if resource not in resources:
                    resources.append(resource)
        who = ", ".join(values) or "(absent)"
        if not resources and who not in self._unmapped:
            self._unmapped.add(who)
            log.warning(
                "%s %s=%s has no resources in server.oauth.identities: it may use nothing", self.issuer, self.claim, who
            )
        subject = str(claims.get("sub") or ", ".join(values))
        return AccessToken(
            token="sha256:" + hashlib.sha256(token.encode()).hexdigest(),
            client_id=str(claims.get("client_id") or claims.get("azp") or subject),
            scopes=str(claims.get("scope") or "").split(),
            expires_at=int(claims["exp"]),
            resource=self.audience,
            subject=subject,
            claims={RESOURCES_CLAIM: resources, "iss": self.issuer},
        )

    async def _key(self, kid: str | None) -> jwt.PyJWK | None:
        now = self.clock()
        fresh = now - self._fetched_at <= self.cache_seconds
        if not fresh or kid not in self._keys and not (kid is None and len(self._keys) == 1):
            # Stale keys are fetched at once, unless the last attempt failed; a key id not seen yet (a
            # rotation, or someone's invention) fetches them at most every REFETCH_UNKNOWN_KID_SECONDS.
            due = (not fresh and self._failing is None) or now - self._attempted_at >= REFETCH_UNKNOWN_KID_SECONDS
            if due:
                async with self._lock:
                    if self._attempted_at < now:
                        await self._refresh(now)
        if self.clock() - self._fetched_at > self.cache_seconds:
            return None  # no keys we may still trust: fail closed
        if kid is None and len(self._keys) == 1:
            return next(iter(self._keys.values()))
        return self._keys.get(kid)

    async def _refresh(self, now: float) -> None:
        self._attempted_at = now
        try:
            keys = await self._fetch()
        except KeysUnavailable as error:
            if self._failing != str(error):
                log.error(
                    "cannot fetch the signing keys of %s (server.oauth.issuer): %s; its tokens are refused"
                    " until it answers",
                    self.issuer,
                    error,
                )
            self._failing = str(error)
            return
        if self._failing is not None:
            log.info("the signing keys of %s can be fetched again", self.issuer)
            self._failing = None
        self._keys, self._fetched_at = keys, now

    async def _fetch(self) -> dict[str | None, jwt.PyJWK]:
        async with httpx2.AsyncClient(timeout=FETCH_TIMEOUT_SECONDS, follow_redirects=False) as http:
            discovery = await _document(http, self.issuer + "/.well-known/openid-configuration")
            if discovery is None:
                discovery = await _document(http, self.issuer + "/.well-known/oauth-authorization-server")
            if discovery is None:
                raise KeysUnavailable("no discovery document (.well-known/openid-configuration)")
            if discovery.get("issuer") != self.issuer:
                raise KeysUnavailable(f"its discovery document names the issuer {discovery.get('issuer')!r}")
            uri = discovery.get("jwks_uri")
            try:
                uri = check_https_url(str(uri), "jwks_uri")
            except ValueError as error:
                raise KeysUnavailable(str(error)) from None
            document = await _document(http, uri)
        if document is None or not isinstance(document.get("keys"), list):
            raise KeysUnavailable(f"no key set at {uri}")
        keys: dict[str | None, jwt.PyJWK] = {}
        for entry in document["keys"]:
            if not isinstance(entry, dict) or entry.get("kty") not in ASYMMETRIC or entry.get("use", "sig") != "sig":
                continue
            try:
                key = jwt.PyJWK(entry)
            except jwt.PyJWTError:
                continue
            keys[entry.get("kid")] = key
        if not keys:
            raise KeysUnavailable(f"no signing key at {uri}")
        return keys


async def _document(http: httpx2.AsyncClient, url: str) -> dict[str, Any] | None:
    """A JSON document, None when it is not there (404); KeysUnavailable when it cannot be had."""
    try:
        response = await http.get(url, headers={"Accept": "application/json"})
    except httpx2.HTTPError as error:
        raise KeysUnavailable(f"{url}: {type(error).__name__}: {error}") from None
    if response.status_code == 404:
        return None
    if response.status_code != 200 or len(response.content) > MAX_DOCUMENT_BYTES:
        raise KeysUnavailable(f"{url} answered {response.status_code}")
    try:
        document = response.json()
    except ValueError:
        raise KeysUnavailable(f"{url} is not JSON") from None
    return document if isinstance(document, dict) else None
