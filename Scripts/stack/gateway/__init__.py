"""The local iPadCast gateway: /auth/v1, /rest/v1, /realtime/v1 (realtime.py),
/api/public, the receiver pages, a STUN responder and the cleanup job, on one
loopback port. Started by Scripts/devstack as `python -m gateway …`."""
