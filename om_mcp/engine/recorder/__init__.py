"""The engine's synchronous face, for processes without an event loop: the host hook (one process
per prompt), `om-mcp ingest`, and the worker either of them starts when work is due.

`Recorder` (`recorder.py`) opens the memory file with the few settings it needs (`settings.py`:
cached beside the config, so no pydantic on a prompt), records what a host read (`rows.py`: the
lenient intake, then the append pipeline and the record's state, in one write), gives the text a
session starts with (`context.py`, cut to size by `text.py`), and starts `om-mcp worker` when work
is due and nobody drains (`spawn.py`). It never calls a model, and imports only what the call needs:
everything here runs on every prompt of every host.
"""

from om_mcp.engine.recorder.recorder import Recorded, Recorder, Session
from om_mcp.engine.recorder.settings import RecorderSettings, load_settings, settings_of

__all__ = ["Recorded", "Recorder", "RecorderSettings", "Session", "load_settings", "settings_of"]
