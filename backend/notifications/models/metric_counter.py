from django.db import models


class MetricCounter(models.Model):
    """One running total of ``metric_counters`` where no Redis is configured (the embedded default).

    ``name`` is the counter's family and labels joined by ``|`` (``state|standard|sent``); ``value``
    only grows, by ``INSERT … ON CONFLICT DO UPDATE`` after each transaction that counted.
    """

    name = models.CharField(max_length=200, primary_key=True)
    value = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.name} = {self.value}"
