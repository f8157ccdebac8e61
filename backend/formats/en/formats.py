# Support reads event order and latency off these: seconds always, ISO order, UTC (TIME_ZONE).
DATETIME_FORMAT = "Y-m-d H:i:s T"
SHORT_DATETIME_FORMAT = "Y-m-d H:i:s"
