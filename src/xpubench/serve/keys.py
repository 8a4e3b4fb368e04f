"""What a serving point's key holds where the server does not say (plan/serve.py makes the points,
serve/rerun.py says them again); no httpx here, so a report or the site reading a key imports none."""

from xpubench.devices.device import REMOTE as _REMOTE_KIND

BACKEND = "http"          # the engine of a server at a URL that does not say which it is
AS_SERVED = "as-served"   # the format of a URL's model that its server does not say
REMOTE = str(_REMOTE_KIND)  # the device of a URL's server that -d does not name (devices/device.py REMOTE)
OPEN_CAP = 64             # an open-loop point's cap on requests in flight without users (--concurrency)
