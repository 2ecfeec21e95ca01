"""Google credentials for the emulator: a service account key file whose token endpoint
(``token_uri``) is the emulator's ``/vertex/token`` and whose Cloud Storage
(``gcs_base_url``, read by obstore) is the emulator's ``/gcs``, and the environment of a
Vertex AI user pointed at it. google-auth signs a real JWT grant with the key (an RSA key
made once a process), so the sign-in is the one a deployed service account makes, over
loopback.

The environment turns off google-auth's look for a Google Cloud machine's metadata server
(``NO_GCE_CHECK``, and its address set to a closed loopback port), so nothing leaves
127.0.0.1 even when no credentials are found.
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["LOCATION", "PROJECT", "service_account_key", "vertex_env"]

PROJECT = "agac-emulator"
LOCATION = "us-central1"
_KEY: list[str] = []


def _private_key() -> str:
    if not _KEY:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa

        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        _KEY.append(pem.decode())
    return _KEY[0]


def service_account_key(folder: Path, root: str) -> Path:
    """Write ``folder/service-account.json`` for the emulator at ``root``; its path."""
    path = folder / "service-account.json"
    key = {
        "type": "service_account",
        "project_id": PROJECT,
        "private_key_id": "emulator",
        "private_key": _private_key(),
        "client_email": f"agac@{PROJECT}.iam.gserviceaccount.com",
        "client_id": "1",
        "token_uri": f"{root}/vertex/token",
        # obstore's settings for a local Cloud Storage: no OAuth, this address.
        "gcs_base_url": f"{root}/gcs",
        "disable_oauth": True,
    }
    path.write_text(json.dumps(key))
    return path


def vertex_env(folder: Path, root: str) -> dict[str, str]:
    """A Vertex AI user's environment pointed at the emulator at ``root`` (the key file
    written in ``folder``): credentials, project, location, endpoint, plain HTTP allowed
    for the Cloud Storage calls, and no metadata server looked for."""
    key = str(service_account_key(folder, root))
    return {
        "GOOGLE_APPLICATION_CREDENTIALS": key,
        "GOOGLE_SERVICE_ACCOUNT": key,
        "GOOGLE_CLOUD_PROJECT": PROJECT,
        "GOOGLE_CLOUD_LOCATION": LOCATION,
        "GOOGLE_VERTEX_BASE_URL": root,
        "AWS_ALLOW_HTTP": "true",
        "CLOUDSDK_CONFIG": str(folder / "gcloud"),
        "NO_GCE_CHECK": "true",  # google-auth reads only this exact text
        "GCE_METADATA_HOST": "127.0.0.1:9",
        "GCE_METADATA_IP": "127.0.0.1:9",
    }
