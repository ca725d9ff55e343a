"""The owner's way in: a preview URL carrying a short-lived signed link token."""

from __future__ import annotations

from burrow.config import Settings
from burrow.preview.tokens import PreviewSigner, load_key
from burrow.preview_hosts import PreviewHosts
from burrow.store.datadir import ensure_private_dir


class PreviewLinks:
    def __init__(self, hosts: PreviewHosts, signer: PreviewSigner, ttl: float) -> None:
        self.hosts = hosts
        self.signer = signer
        self.ttl = ttl

    @classmethod
    def from_settings(cls, settings: Settings) -> PreviewLinks:
        ensure_private_dir(settings.data_dir)
        signer = PreviewSigner(load_key(settings.data_dir))
        return cls(PreviewHosts.from_settings(settings), signer, settings.preview_token_ttl)

    def url(self, cid: str, port: int) -> str:
        """The clean address (what `preview.opened` carries; it admits no one by itself)."""
        return self.hosts.url(cid, port)

    def signed_url(self, user_id: str, cid: str, port: int, session: str) -> str:
        """The address for the owner's iframe: the token becomes a cookie on first load.
        `session` is the digest of the caller's sign-in: the preview closes when it ends."""
        token = self.signer.mint("link", user_id, cid, port, self.ttl, session=session)
        return f"{self.hosts.url(cid, port)}?burrow_token={token}"
