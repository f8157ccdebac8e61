"""Model instances built without ``Model.__init__``, for the hot paths that make thousands of them.

``Model.__init__`` sets each of a row's values through its field's descriptor, looks up every
field's default, checks and caches each related object through its descriptor and sends
``pre_init``/``post_init``: for a notification 35 µs of CPU where ``maker`` takes 10, a sixth of a
batch send's CPU with the history rows (README "Throughput: the send API", seventh round). The
builders here give the same instance:

- ``loader``: a row read from the database, as ``Model.from_db`` makes it (a batch's read), and
  ``load_all`` for a queryset's rows (a batch send's recipients);
- ``maker``: a new, unsaved instance, as ``Model(**values)`` makes it (acceptance's rows).

Each refuses (``ValueError``) what it would silently skip: ``pre_init``/``post_init`` receivers and
a generated field or one whose attribute is not a plain ``DeferredAttribute`` (a file field's, say),
all three; database routers, ``maker`` (a foreign key's descriptor consults them); a queryset's
joins, prefetches, annotations and known related objects, ``load_all``.
"""

from collections.abc import Callable, Sequence
from functools import cache
from typing import Any

from django.db import DEFAULT_DB_ALIAS, models, router
from django.db.models import signals
from django.db.models.base import ModelState
from django.db.models.fields.related_descriptors import ForeignKeyDeferredAttribute
from django.db.models.query_utils import DeferredAttribute

# The attributes of plain fields and of foreign keys' columns: setting one on a new instance puts the value in its
# ``__dict__`` (a foreign key's also forgets a cached related instance, which a new instance has none of).
_PLAIN_ATTRIBUTES = (DeferredAttribute, ForeignKeyDeferredAttribute)


def _refuse_what_is_skipped(model: type[models.Model]) -> None:
    """``ValueError`` for init receivers (checked each time: one may be connected any time) or an unusual field."""
    if signals.pre_init.has_listeners(model) or signals.post_init.has_listeners(model):
        raise ValueError(f"{model.__name__} has pre_init/post_init receivers: build it with Model.__init__")
    _check_fields(model)


@cache
def _check_fields(model: type[models.Model]) -> None:
    """``ValueError`` for a generated field or one with its own descriptor (once per model: fields are the class's)."""
    for field in model._meta.concrete_fields:
        if field.generated or type(getattr(model, field.attname, None)) not in _PLAIN_ATTRIBUTES:
            raise ValueError(f"{field!r} is generated or has its own descriptor, which the builders would skip")


def loader(model: type[models.Model], attnames: Sequence[str], db: str) -> Callable[[Sequence[Any]], models.Model]:
    """A function making an instance of ``model`` as ``Model.from_db`` would, from a row of ``attnames`` in ``db``.

    The fields not named are deferred. ``Model.__init__`` sets each value through its field's
    descriptor and sends ``pre_init``/``post_init``; here the values go into the instance's
    ``__dict__`` at once, which is what those descriptors do for a new instance. Raises
    ``ValueError`` for a model with ``pre_init``/``post_init`` receivers, which this would skip
    (checked once here, not per row: 3.5 µs a row for both models), or a field ``_check_fields`` refuses.
    """
    _refuse_what_is_skipped(model)

    def load(values: Sequence[Any]) -> models.Model:
        instance = model.__new__(model)
        instance.__dict__.update(zip(attnames, values, strict=True))
        instance._state = ModelState()
        instance._state.adding = False
        instance._state.db = db
        return instance

    return load


def load_all(queryset: models.QuerySet, unread: Sequence[str] = ()) -> list[models.Model]:
    """The rows of ``queryset`` as its own iterator would give them, ``unread`` fields deferred, built by ``loader``.

    For a plain filter of one model: ``ValueError`` for one that joins (``select_related``),
    prefetches, annotates (``extra`` too), defers, or knows its related object (a related manager's,
    whose rows Django's iterator gives their owner), all of which this would drop; and for an
    ``unread`` name that is no concrete field, or the primary key (``defer`` never defers it).
    """
    query, model = queryset.query, queryset.model
    extras = query.select_related or queryset._prefetch_related_lookups or query.annotations or query.extra
    if extras or query.deferred_loading[0] or queryset._known_related_objects:
        raise ValueError(
            "load_all reads a plain queryset: no select_related, prefetch, annotation, extra, only, defer "
            "or related manager"
        )
    names = {field.name for field in model._meta.concrete_fields}
    if not set(unread) <= names - {model._meta.pk.name}:
        raise ValueError(f"{model.__name__} cannot leave {sorted(set(unread) - names)} or its primary key unread")
    attnames = [field.attname for field in model._meta.concrete_fields if field.name not in unread]
    load = loader(model, attnames, queryset.db)
    return [load(values) for values in queryset.values_list(*attnames)]


# What ``maker`` does for a model: its plain fields given (name, attname), its foreign keys given, the constant
# defaults of the fields not given (by attname) and the callable ones.
_Defaults = tuple[tuple[str, Callable[[], Any]], ...]
_Plan = tuple[tuple[tuple[str, str], ...], tuple[models.ForeignKey, ...], dict[str, Any], _Defaults]


@cache
def _plan(model: type[models.Model], names: tuple[str, ...]) -> _Plan:
    """What ``maker`` does for ``model`` given ``names``: worked out once per process, reused for every instance."""
    fields = {field.name: field for field in model._meta.concrete_fields}
    unknown = [name for name in names if name not in fields]
    if unknown:
        raise ValueError(f"{model.__name__} has no concrete fields {unknown}")
    plain, related, constant, computed = [], [], {}, []
    for field in model._meta.concrete_fields:
        if field.name in names and field.is_relation:
            related.append(field)
        elif field.name in names:
            plain.append((field.name, field.attname))
        elif field.has_default() and callable(field.default):
            computed.append((field.attname, field.get_default))
        else:
            constant[field.attname] = field.get_default()
    for field in related:
        if len(field.related_fields) != 1 or not field.remote_field.multiple:
            raise ValueError(f"{field!r}: maker builds only single-column many-to-one keys")
    return tuple(plain), tuple(related), constant, tuple(computed)


def maker(model: type[models.Model], names: Sequence[str]) -> Callable[..., models.Model]:
    """A function making an unsaved ``model`` from keyword values for exactly ``names``, as ``Model(**values)`` would.

    The instance is the same: every field not named holds its default (a callable default is called
    per instance), a foreign key given its related instance (or None) holds its key and caches the
    instance, ``_state.db`` is the first related instance's database, as the foreign keys'
    descriptors set it. Raises ``ValueError``: here for a name that is not a concrete field of
    ``model``, a field ``_check_fields`` refuses, database routers, ``pre_init``/``post_init``
    receivers (receivers and routers checked each time a maker is made, as ``loader`` checks
    receivers once per read: make one per batch, not one per process); per instance for a related
    instance of the wrong model or of another database (the descriptor's errors). A missing or
    extra keyword is a ``KeyError``/``TypeError``, never a silently defaulted field.
    """
    _refuse_what_is_skipped(model)
    if router.routers:
        raise ValueError("maker assumes no database routers: build instances with Model.__init__")
    plain, related, constant, computed = _plan(model, tuple(names))
    expected = len(names)

    def make(**values: Any) -> models.Model:
        if len(values) != expected:
            raise TypeError(f"{model.__name__} maker takes {sorted(names)}, got {sorted(values)}")
        instance = model.__new__(model)
        data = instance.__dict__
        data["_state"] = ModelState()
        data.update(constant)
        for attname, default in computed:
            data[attname] = default()
        for name, attname in plain:
            data[attname] = values[name]
        for field in related:
            value = values[field.name]
            if value is None:
                data[field.attname] = None
            else:
                _check_related(instance, field, value)
                data[field.attname] = getattr(value, field.related_fields[0][1].attname)
            field.set_cached_value(instance, value)
        return instance

    return make


def _check_related(instance: models.Model, field: models.ForeignKey, value: models.Model) -> None:
    """``ForwardManyToOneDescriptor.__set__``'s checks and database choice, without routers (Django 5.2)."""
    if not isinstance(value, field.remote_field.model._meta.concrete_model):
        raise ValueError(
            f'Cannot assign "{value!r}": "{instance._meta.object_name}.{field.name}" must be a '
            f'"{field.remote_field.model._meta.object_name}" instance.'
        )
    state = instance._state
    if state.db is None:
        state.db = value._state.db or DEFAULT_DB_ALIAS
    if value._state.db is None:
        value._state.db = state.db
    elif value._state.db != state.db:
        raise ValueError(f'Cannot assign "{value!r}": the current database router prevents this relation.')
