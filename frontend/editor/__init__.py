"""The staff template editor (issue 5 item 3): list of versions, editor with live SMS pricing, save, approve.

``preview.py`` computes what the page shows beside the text (one source of
truth: ``rendering``, ``sms_encoding``, ``pricing``), ``actions.save_template_draft`` saves a
new draft version, ``views.py`` parses, authorizes, calls one of those and
answers: the whole page, or for HTMX the partial it asked for. The approval
workflow has its own views: ``review.py`` (what awaits approval, a version
beside the one in use by ``diff.py``, request changes / reject) and
``self_send.py`` ("Send a test to me", by ``actions.send_to_self``).
"""
