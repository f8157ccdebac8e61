from django.contrib.auth.models import Group, Permission, User
from django.core.management.base import BaseCommand
from django.db import transaction
from django.utils import timezone

from backend.notifications.models import (
    Category,
    Channel,
    Device,
    Kind,
    OverLimit,
    Priority,
    Recipient,
    TemplateVersion,
)

DEMO_PASSWORD = "demo"

# name → description, category, priority, channels in order, validity (s), over the rate limit, declared params.
KINDS = {
    "otp": ("One-time login code", Category.SECURITY, Priority.HIGH, [Channel.SMS, Channel.EMAIL], 300,
            OverLimit.SUPPRESS, {"code": {"example": "482913", "max_length": 8, "secret": True}}),
    "shipped": ("Order shipped", Category.TRANSACTIONAL, Priority.STANDARD, [Channel.EMAIL, Channel.PUSH, Channel.SMS],
                7 * 86400, OverLimit.SUPPRESS, {"order": {"example": "5012", "max_length": 12},
                                                "tracking_url": {"example": "https://example.com/t/5012",
                                                                 "max_length": 80}}),
    "promo": ("Marketing offer", Category.MARKETING, Priority.STANDARD, [Channel.EMAIL, Channel.PUSH], 2 * 86400,
              OverLimit.DIGEST, {"percent": {"example": "20", "max_length": 3}}),
    # What rate-limited notifications of a kind with over_limit=digest are folded into.
    "digest": ("Digest of held notifications", Category.TRANSACTIONAL, Priority.STANDARD, [Channel.EMAIL], 86400,
               OverLimit.SUPPRESS, {"items": {"example": ["20% off this weekend"], "max_length": 2000},
                                    "count": {"example": "1", "max_length": 4}}),
}  # fmt: skip

# (kind, language, channel) → (subject, text, html), in English, Arabic and Persian. Embedded LTR runs
# (order numbers, codes) are isolated with <bdi> so they keep their order in RTL text.
TEMPLATES = {
    ("digest", "en", Channel.EMAIL): (
        "{{ count }} updates you missed",
        "While you were away:\n{% for item in items %}- {{ item }}\n{% endfor %}",
        "<h2>While you were away</h2><ul>{% for item in items %}<li><bdi>{{ item }}</bdi></li>{% endfor %}</ul>",
    ),
    ("digest", "ar", Channel.EMAIL): (
        "{{ count }} تحديثات فاتتك",
        "أثناء غيابك:\n{% for item in items %}- {{ item }}\n{% endfor %}",
        "<h2>أثناء غيابك</h2><ul>{% for item in items %}<li><bdi>{{ item }}</bdi></li>{% endfor %}</ul>",
    ),
    ("digest", "fa", Channel.EMAIL): (
        "{{ count }} به‌روزرسانی که از دست دادید",
        "در غیاب شما:\n{% for item in items %}- {{ item }}\n{% endfor %}",
        "<h2>در غیاب شما</h2><ul>{% for item in items %}<li><bdi>{{ item }}</bdi></li>{% endfor %}</ul>",
    ),
    ("otp", "en", Channel.SMS): ("", "Your code is {{ code }}. It expires in 5 minutes.", ""),
    ("otp", "ar", Channel.SMS): ("", "رمز التحقق الخاص بك هو {{ code }}. تنتهي صلاحيته خلال 5 دقائق.", ""),
    ("otp", "en", Channel.EMAIL): (
        "Your login code",
        "Your code is {{ code }}. It expires in 5 minutes.",
        "<p>Your code is <strong><bdi>{{ code }}</bdi></strong>. It expires in 5 minutes.</p>",
    ),
    ("otp", "ar", Channel.EMAIL): (
        "رمز الدخول",
        "رمز التحقق الخاص بك هو {{ code }}. تنتهي صلاحيته خلال 5 دقائق.",
        "<p>رمز التحقق الخاص بك هو <strong><bdi>{{ code }}</bdi></strong>. تنتهي صلاحيته خلال 5 دقائق.</p>",
    ),
    ("otp", "fa", Channel.SMS): ("", "کد ورود شما {{ code }} است. این کد تا ۵ دقیقه اعتبار دارد.", ""),
    ("otp", "fa", Channel.EMAIL): (
        "کد ورود",
        "کد ورود شما {{ code }} است. این کد تا ۵ دقیقه اعتبار دارد.",
        "<p>کد ورود شما <strong><bdi>{{ code }}</bdi></strong> است. این کد تا ۵ دقیقه اعتبار دارد.</p>",
    ),
    ("shipped", "en", Channel.EMAIL): (
        "Your order {{ order }} has shipped",
        "Good news: your order {{ order }} is on its way.\nTrack it at {{ tracking_url|default('your account') }}.",
        "<h2>Your order is on its way</h2><p>Order <bdi>{{ order }}</bdi> has shipped.</p>",
    ),
    ("shipped", "ar", Channel.EMAIL): (
        "تم شحن طلبك رقم {{ order }}",
        "خبر سار: طلبك رقم {{ order }} في الطريق إليك.",
        "<h2>طلبك في الطريق إليك</h2><p>تم شحن الطلب رقم <bdi>{{ order }}</bdi>.</p>",
    ),
    ("shipped", "en", Channel.SMS): ("", "Your order {{ order }} has shipped.", ""),
    ("shipped", "en", Channel.PUSH): ("Order shipped", "Your order {{ order }} is on its way.", ""),
    ("shipped", "ar", Channel.PUSH): ("تم شحن الطلب", "طلبك رقم {{ order }} في الطريق إليك.", ""),
    ("shipped", "ar", Channel.SMS): ("", "تم شحن طلبك رقم {{ order }}.", ""),
    ("shipped", "fa", Channel.EMAIL): (
        "سفارش {{ order }} شما ارسال شد",
        "خبر خوب: سفارش شماره {{ order }} شما در راه است.",
        "<h2>سفارش شما در راه است</h2><p>سفارش شماره <bdi>{{ order }}</bdi> ارسال شد.</p>",
    ),
    ("shipped", "fa", Channel.PUSH): ("سفارش ارسال شد", "سفارش شماره {{ order }} شما در راه است.", ""),
    ("shipped", "fa", Channel.SMS): ("", "سفارش شماره {{ order }} شما ارسال شد.", ""),
    ("promo", "en", Channel.PUSH): ("{{ percent }}% off", "Everything is {{ percent }}% off until Sunday.", ""),
    ("promo", "ar", Channel.PUSH): ("خصم {{ percent }}٪", "خصم {{ percent }}٪ على كل شيء حتى يوم الأحد.", ""),
    ("promo", "en", Channel.EMAIL): (
        "{{ percent }}% off this weekend",
        "Everything is {{ percent }}% off until Sunday.",
        "<h2>{{ percent }}% off this weekend</h2><p>Everything is {{ percent }}% off until Sunday.</p>",
    ),
    ("promo", "ar", Channel.EMAIL): (
        "خصم {{ percent }}٪ في عطلة نهاية الأسبوع",
        "خصم {{ percent }}٪ على كل شيء حتى يوم الأحد.",
        "<h2>خصم <bdi>{{ percent }}٪</bdi> في عطلة نهاية الأسبوع</h2><p>خصم على كل شيء حتى يوم الأحد.</p>",
    ),
    ("promo", "fa", Channel.PUSH): ("{{ percent }}٪ تخفیف", "تا یکشنبه {{ percent }}٪ تخفیف روی همه چیز.", ""),
    ("promo", "fa", Channel.EMAIL): (
        "{{ percent }}٪ تخفیف آخر هفته",
        "تا یکشنبه {{ percent }}٪ تخفیف روی همه چیز.",
        "<h2><bdi>{{ percent }}٪</bdi> تخفیف آخر هفته</h2><p>تا یکشنبه روی همه چیز تخفیف.</p>",
    ),
    # The in-app inbox: the subject is the message's title, the text its body.
    ("otp", "en", Channel.INAPP): ("Your login code", "Your code is {{ code }}. It expires in 5 minutes.", ""),
    ("otp", "ar", Channel.INAPP): ("رمز الدخول", "رمز التحقق الخاص بك هو {{ code }}. تنتهي صلاحيته خلال 5 دقائق.", ""),
    ("shipped", "en", Channel.INAPP): ("Order {{ order }} has shipped", "Your order {{ order }} is on its way.", ""),
    ("shipped", "ar", Channel.INAPP): ("تم شحن طلبك رقم {{ order }}", "طلبك رقم {{ order }} في الطريق إليك.", ""),
    ("promo", "en", Channel.INAPP): (
        "{{ percent }}% off this weekend",
        "Everything is {{ percent }}% off until Sunday.",
        "",
    ),
    ("promo", "ar", Channel.INAPP): (
        "خصم {{ percent }}٪ في عطلة نهاية الأسبوع",
        "خصم {{ percent }}٪ على كل شيء حتى يوم الأحد.",
        "",
    ),
    ("otp", "fa", Channel.INAPP): ("کد ورود", "کد ورود شما {{ code }} است. این کد تا ۵ دقیقه اعتبار دارد.", ""),
    ("shipped", "fa", Channel.INAPP): ("سفارش {{ order }} ارسال شد", "سفارش شماره {{ order }} شما در راه است.", ""),
    ("promo", "fa", Channel.INAPP): (
        "{{ percent }}٪ تخفیف آخر هفته",
        "تا یکشنبه {{ percent }}٪ تخفیف روی همه چیز.",
        "",
    ),
}

RECIPIENTS = [
    ("u-ar-1", "layla@example.com", "+966501234567", "ar", "Asia/Riyadh"),
    ("u-en-1", "sam@example.com", "+14155550123", "en", "America/New_York"),
    ("u-fa-1", "dariush@example.com", "+989121234567", "fa", "Asia/Tehran"),
]

# Role → the admin permissions it needs ("codename" of this app, "app_label.codename" of another);
# later issues give each role its own pages.
GROUP_PERMISSIONS = {
    "support agent": [
        "view_notification",
        "view_attempt",
        "view_statechange",
        "view_recipient",
        "view_device",
        "view_deadletter",
        "change_deadletter",  # change: the "Replay selected" action
        "view_breakerevent",
        "view_velocityalarm",
        "inbox.view_inboxmessage",  # "did it reach the inbox? was it read?"
        "campaigns.view_campaign",  # "was I in that campaign?": its page, counts and ledger
        "campaigns.view_campaignaudit",
        "support.use_explorer",  # /support/: search, the decision trail, exports
        "support.reveal_contact",  # show a masked phone or email (audited)
    ],
    "template editor": ["view_kind", "view_templateversion", "add_templateversion", "change_templateversion"],
    # Marketers and approvers work with segments' counts and samples, never a person's contact data:
    # no view_recipient (the admin's recipients list), which only support agents need.
    "marketer": [
        "view_kind",
        "view_templateversion",
        "campaigns.add_campaign",
        "campaigns.change_campaign",
        "campaigns.view_campaign",
        "campaigns.add_segment",
        "campaigns.change_segment",
        "campaigns.view_segment",
        "campaigns.view_campaignapproval",
        "campaigns.view_campaignaudit",
    ],
    "approver": [
        "view_kind",
        "view_templateversion",
        "approve_templateversion",
        "campaigns.view_campaign",
        "campaigns.approve_campaign",
        "campaigns.view_segment",
        "campaigns.view_campaignapproval",
        "campaigns.view_campaignaudit",
    ],
}

# username → (group, is_superuser)
STAFF = {
    "admin": ("", True),
    "marketer": ("marketer", False),
    "approver": ("approver", False),
    "editor": ("template editor", False),
    "support": ("support agent", False),
}


def _permissions(names: list[str]) -> list[Permission]:
    """The permissions named as in ``GROUP_PERMISSIONS``, in one query; a name that matches none is an error.

    Raises ``Permission.DoesNotExist`` naming the ones missing.
    """
    wanted = {(app_label or "notifications", codename) for app_label, _, codename in (n.rpartition(".") for n in names)}
    rows = Permission.objects.filter(codename__in={codename for _, codename in wanted}).select_related("content_type")
    found = {}
    for permission in rows:  # the codename alone may match another app's permission too
        pair = (permission.content_type.app_label, permission.codename)
        if pair in wanted:
            found[pair] = permission
    if missing := sorted(wanted - set(found)):
        raise Permission.DoesNotExist(f"No permission {', '.join('.'.join(pair) for pair in missing)}")
    return list(found.values())


class Command(BaseCommand):
    help = "Create (or refresh) the demo kinds, approved en/ar/fa templates, recipients and staff users."

    @transaction.atomic
    def handle(self, **options):
        kinds = {}
        for name, (description, category, priority, channels, validity, over_limit, params) in KINDS.items():
            kinds[name], _ = Kind.objects.update_or_create(
                name=name,
                defaults={
                    "description": description,
                    "category": category,
                    "priority": priority,
                    "channels": channels,
                    "opt_out_allowed": category != Category.SECURITY,
                    "over_limit": over_limit,
                    "params": params,
                    "default_language": "en",
                    "validity_seconds": validity,
                },
            )
        # A saved version never changes: a refresh keeps an existing v1 as it is and adds the missing ones,
        # in one INSERT (every test that loads the demo data runs this: one get_or_create each was a fifth of it).
        stored_versions = set(
            TemplateVersion.objects.filter(kind__in=kinds.values(), version=1).values_list(
                "kind__name", "language", "channel"
            )
        )
        now = timezone.now()
        missing = [
            TemplateVersion(
                kind=kinds[kind], language=language, channel=channel, version=1, subject=subject, text_body=text,
                html_body=html, status=TemplateVersion.Status.APPROVED, approved_at=now,
            )
            for (kind, language, channel), (subject, text, html) in TEMPLATES.items()
            if (kind, language, channel) not in stored_versions
        ]  # fmt: skip
        for version in missing:  # what save() sets, which bulk_create skips
            version.content_hash = version.compute_content_hash()
        TemplateVersion.objects.bulk_create(missing)
        for user_id, email, phone, language, time_zone in RECIPIENTS:
            recipient, _ = Recipient.objects.update_or_create(
                user_id=user_id,
                defaults={"email": email, "phone": phone, "language": language, "time_zone": time_zone},
            )
            # A phone app registered with FCM (the demo's stub accepts any token).
            Device.objects.get_or_create(recipient=recipient, platform=Device.Platform.FCM, token=f"demo-fcm-{user_id}")
        groups = {}
        for group_name, codenames in GROUP_PERMISSIONS.items():
            groups[group_name], _ = Group.objects.get_or_create(name=group_name)
            groups[group_name].permissions.set(_permissions(codenames))
        # One read and one write a user (a get_or_create, then a save, took five queries in savepoints).
        stored_users = {user.username: user for user in User.objects.filter(username__in=STAFF)}
        for username, (group_name, superuser) in STAFF.items():
            user = stored_users.get(username) or User(username=username, email=f"{username}@example.com")
            user.is_staff = True
            user.is_superuser = superuser
            user.set_password(DEMO_PASSWORD)
            user.save()
            if group_name:
                user.groups.add(groups[group_name])
        self.stdout.write(
            f"Demo data: {len(KINDS)} kinds, {len(TEMPLATES)} templates, {len(RECIPIENTS)} recipients, "
            f"staff {', '.join(STAFF)} (password {DEMO_PASSWORD!r})."
        )
