"""The host side of a running program: what the in-scan callbacks hand over is recorded
(``recorder``, in the background ``writer``), shown (``progress``, its time left ``estimate``) and sent
to the dashboards (``dashboards``)."""
