"""Delivery receipts: what the SMS providers later say became of a message they accepted (DESIGN.md §5b).

``signatures`` (how each provider signs), ``twilio`` and ``vonage`` (their receipts read into one
shape, their codes and what they mean), ``apply`` (matching and the state change: idempotent and
order-safe), ``views`` (the two webhooks: no login, a verified signature instead).
"""
