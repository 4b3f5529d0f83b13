"""One secret of each class the detectors know, as a paste would carry it: what the tests and
`benchmarks/attacks.py` plant on every way in, then look for in the bytes of the database file.

Each entry is (class, the text planted, the part of it that must not be stored). None is a
placeholder; each is split in the source so that this file holds no secret a scanner would flag.
"""

from __future__ import annotations

PLANTS: list[tuple[str, str, str]] = [
    ("cloud key", "aws_access_key_id = AKIA" + "J7ZQ4XK2M9PL3VWN", "AKIA" + "J7ZQ4XK2M9PL3VWN"),
    (
        "VCS token",
        "token ghp_" + "Zq8Lm2Nx4Vb6Cd1Fg3Hj5Kp7Rt9Wy0Ua2Se4",
        "ghp_" + "Zq8Lm2Nx4Vb6Cd1Fg3Hj5Kp7Rt9Wy0Ua2Se4",
    ),
    ("GitLab token", "push with glpat-" + "Rq3Tv5Wx7Yz9Ab1Cd3Ef", "glpat-" + "Rq3Tv5Wx7Yz9Ab1Cd3Ef"),
    (
        "chat token",
        "SLACK=xoxb-" + "298347291034-2983472910345-QwErTyUiOpAsDfGh",
        "xoxb-" + "298347291034-2983472910345",
    ),
    ("payment key", "stripe sk_live_" + "51HqL8dKq2mN4pR6sT8vX0yZ", "sk_live_" + "51HqL8dKq2mN4pR6sT8vX0yZ"),
    (
        "AI key",
        "OPENAI_API_KEY=sk-proj-" + "Qm3Np5Rs7Tu9Vw1Xy3Za5Bc7De9Fg1Hi3Jk5L",
        "sk-proj-" + "Qm3Np5Rs7Tu9Vw1Xy3Za5Bc7",
    ),
    (
        "AI key (Anthropic)",
        "sk-ant-api03-" + "Hx7Jk2Lm4Np6Qr8St0Uv2Wx4Yz6Ab8Cd0Ef2Gh4",
        "sk-ant-api03-" + "Hx7Jk2Lm4Np6Qr8",
    ),
    (
        "private key",
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n"
        "-----END OPENSSH PRIVATE KEY-----",
        "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ",
    ),
    (
        "JWT",
        "session=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhdHRhY2tlciJ9.Qx2Lm4Np6Rs8Tu0Vw2Xy4Za6Bc8De0Fg2",
        "Qx2Lm4Np6Rs8Tu0Vw2Xy4Za6Bc8De0Fg2",
    ),
    ("URL password", "https://admin:Wr0ngH0rse@intranet.example/report", "Wr0ngH0rse"),
    ("connection string", "Server=db;Database=app;User Id=sa;Password=C0nnStr1ng!;", "C0nnStr1ng!"),
    ("env file line", "# .env\nAPP_SECRET=envS3cretValue9\nDEBUG=false", "envS3cretValue9"),
    ("command-line flag", "docker login --username ci --password D0ckerPass42", "D0ckerPass42"),
    ("PGPASSWORD=", "PGPASSWORD=Pgp4ssw0rd7 psql -h db", "Pgp4ssw0rd7"),
    ("GITHUBTOKEN= (no separator)", "GITHUBTOKEN=Gt0kenValue77aa", "Gt0kenValue77aa"),
    ("curl -u", "curl -u admin:Cur1Pass99 https://intranet", "Cur1Pass99"),
    ("unclosed <private>", "my diagnosis <private>the unclosed private diagnosis", "the unclosed private diagnosis"),
]
ONE_LINE = [plant for plant in PLANTS if "\n" not in plant[1]]  # what a title or a remembered line can hold
SECRETS = [plant[2] for plant in PLANTS]


def stored(data: bytes, secrets: list[str] | None = None) -> list[str]:
    """The secrets (all of PLANTS' by default) that `data` (a database file's bytes) holds."""
    return [s for s in (SECRETS if secrets is None else secrets) if s.encode() in data]
