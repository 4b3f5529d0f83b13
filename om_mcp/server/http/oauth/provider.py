"""om-mcp's own authorization server, as the SDK's `OAuthAuthorizationServerProvider`.

The SDK's handlers (`mcp.server.auth`) speak the protocol: metadata, registration, the
authorization request's checks (client, redirect URI, PKCE S256), the token endpoint's checks
(client, code expiry, redirect URI, the PKCE verifier), revocation. This class answers what they
ask, from `Memory.grants` (engine/grants.py, which stores every secret as a digest):

* every client is public (`token_endpoint_auth_method` "none"): PKCE proves the code's holder, and
  no client secret exists to be stored or leaked (RFC 7591 §3.2.1 lets the server replace what a
  client asked for; the SDK answers the registration with the record this class was handed);
* `authorize` sends the browser to the consent page (`consent.py`), which makes the grant;
* a code or refresh token is used once; one presented again revokes its grant (the token family);
* an access token carries its grant's resources in `RESOURCES_CLAIM`, like a configured bearer
  token: an OAuth grant is one more way to hold a scope (`server/http/auth.py`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    AuthorizeError,
    OAuthAuthorizationServerProvider,
    RefreshToken,
    RegistrationError,
    TokenError,
)
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from om_mcp.config import is_loopback_host
from om_mcp.engine import Grants
from om_mcp.server.http.auth import RESOURCES_CLAIM

log = logging.getLogger(__name__)

# Schemes a redirect must never use (a page of the browser's own); http only to loopback (RFC 8252 §7.3).
FORBIDDEN_SCHEMES = frozenset({"javascript", "data", "file", "vbscript", "about", "blob"})


def redirect_refusal(uri: str) -> str | None:
    """Why a client may not register this redirect URI (None: it may)."""
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    if not scheme or scheme in FORBIDDEN_SCHEMES:
        return f"redirect URI {uri!r}: scheme {scheme or '(none)'!r} is not allowed"
    if parts.fragment:
        return f"redirect URI {uri!r} must not have a fragment"
    if scheme == "http" and not is_loopback_host(parts.hostname or ""):
        return f"redirect URI {uri!r}: http only to loopback (127.0.0.1, [::1], localhost); use https"
    return None


class Provider(OAuthAuthorizationServerProvider[AuthorizationCode, RefreshToken, AccessToken]):
    """The SDK's provider protocol over `Grants` (see the module docstring). `grants` is awaited per
    call: the engine opens with the server's lifespan, after the app is built."""

    def __init__(
        self,
        grants: Callable[[], Awaitable[Grants]],
        issuer: str,
        resource: str,
        consent: Callable[[OAuthClientInformationFull, AuthorizationParams], str],
    ) -> None:
        self._grants = grants
        self.issuer = issuer
        self.resource = resource
        self._consent = consent

    # -- clients -------------------------------------------------------------------------------------

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        if len(client_id) > 200:
            return None
        registration = await (await self._grants()).client(client_id)
        return None if registration is None else OAuthClientInformationFull.model_validate_json(registration)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        for uri in client_info.redirect_uris or []:
            refusal = redirect_refusal(str(uri))
            if refusal:
                raise RegistrationError("invalid_redirect_uri", refusal)
        if len(client_info.model_dump_json()) > 16_384:
            raise RegistrationError("invalid_client_metadata", "the registration is over 16 KiB")
        client_info.token_endpoint_auth_method = "none"
        client_info.client_secret = None
        client_info.client_secret_expires_at = None
        await (await self._grants()).register(client_info.client_id, client_info.model_dump_json(exclude_none=True))
        log.info("OAuth client registered: %s (%s)", client_info.client_name or "unnamed", client_info.client_id)

    # -- authorization ---------------------------------------------------------------------------------

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        if params.resource is not None and not self.serves(params.resource):
            raise AuthorizeError("invalid_target", f"this server is the resource {self.resource}")
        return self._consent(client, params)

    def serves(self, resource: str) -> bool:
        """Is `resource` (an RFC 8707 indicator) this server? Its MCP endpoint, or its origin."""
        wanted = resource.rstrip("/")
        return wanted in (self.resource, self.issuer)

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        found = await (await self._grants()).code(authorization_code)
        if found is None:
            return None
        detail = found.detail
        return AuthorizationCode(
            code=authorization_code,
            scopes=detail.get("scopes") or [],
            expires_at=found.expires_at,
            client_id=found.client_id or "",
            code_challenge=detail["code_challenge"],
            redirect_uri=detail["redirect_uri"],
            redirect_uri_provided_explicitly=detail["redirect_uri_provided_explicitly"],
            resource=self.resource,
            subject=found.grant_id,
        )

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        return await self._exchange(authorization_code.code, "code", authorization_code.scopes)

    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str) -> RefreshToken | None:
        found = await (await self._grants()).refresh_token(refresh_token)
        if found is None or found.client_id != client.client_id:
            return None
        return RefreshToken(
            token=refresh_token,
            client_id=found.client_id,
            scopes=found.detail.get("scopes") or [],
            expires_at=int(found.expires_at),
            resource=self.resource,
            subject=found.grant_id,
        )

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        return await self._exchange(refresh_token.token, "refresh", scopes)

    async def _exchange(self, secret: str, kind: str, scopes: list[str]) -> OAuthToken:
        issued = await (await self._grants()).exchange(secret, kind)
        if issued is None:
            # Lost a race with another use of the same secret: that is a replay, and revoked the grant.
            raise TokenError("invalid_grant", f"the {kind.replace('code', 'authorization code')} was already used")
        return OAuthToken(
            access_token=issued.access_token,
            expires_in=issued.expires_in,
            refresh_token=issued.refresh_token,
            scope=" ".join(scopes) or None,
        )

    # -- tokens ----------------------------------------------------------------------------------------

    async def load_access_token(self, token: str) -> AccessToken | None:
        if not token.startswith("om_at_"):
            return None  # another verifier's, or nobody's: no trip to the database
        found = await (await self._grants()).access_token(token)
        if found is None or found.grant_id is None:
            return None
        return AccessToken(
            token=found.digest,  # kept in memory per request: the digest does as well as the secret
            client_id=found.client_id or "",
            scopes=[],
            expires_at=int(found.expires_at),
            resource=self.resource,
            subject=found.grant_id,  # sessions and slots are the grant's
            claims={RESOURCES_CLAIM: list(found.resources), "iss": self.issuer},
        )

    async def verify_token(self, token: str) -> AccessToken | None:
        """The `TokenVerifier` side (the bearer middleware asks every verifier)."""
        found = await self.load_access_token(token)
        return found if found is not None and (found.expires_at or 0) > time.time() else None

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        grants = await self._grants()
        if token.subject:
            await grants.revoke(token.subject)
            log.info("OAuth grant %s revoked by its client %s", token.subject, token.client_id)
