"""Key_Shared consumer selectors, as Pulsar 4.x's StickyKeyConsumerSelector implementations:

- AutoSplitSelector: HashRangeAutoSplitStickyKeyConsumerSelector ("auto-split");
- ConsistentHashingSelector: ConsistentHashingStickyKeyConsumerSelector ("consistent-hashing");
- StickySelector: HashRangeExclusiveStickyKeyConsumerSelector ("sticky", fixed ranges).

sticky_key and sticky_key_hash (Commands.peekStickyKey,
StickyKeyConsumerSelectorUtils.makeStickyKeyHash) give a message's sticky key and its slot; a
selector maps a slot (see slot_of) to a consumer name. Its state is plain lists, dicts, ints
and strings (to_state / from_state), because the caller keeps it in the store between
processes. Consumers are identified by name, as in pulsarctl's consumer records."""
from __future__ import annotations

import base64
import binascii
import bisect
import re

from pulsarctl.broker.hashing import java_utf8, murmur3_32_hash
from pulsarctl.errors import ConsumerAssignError, InvalidValue
from pulsarctl.units import one_of

DEFAULT_RANGE_SIZE = 2 << 15  # StickyKeyConsumerSelector.DEFAULT_RANGE_SIZE = 65536
STICKY_KEY_HASH_NOT_SET = 0  # StickyKeyConsumerSelector: 0 means "no hash", so slots are >= 1
NONE_KEY = b"NONE_KEY"  # Commands.NONE_KEY
AUTO_SPLIT = "auto-split"
CONSISTENT_HASHING = "consistent-hashing"
STICKY = "sticky"
POLICIES = (AUTO_SPLIT, CONSISTENT_HASHING, STICKY)
DEFAULT_POINTS = 100  # subscriptionKeySharedConsistentHashingReplicaPoints
MAX_SLOT = DEFAULT_RANGE_SIZE - 1  # 65535
_RANGE_RE = re.compile(r"\s*(\d+)\s*-\s*(\d+)\s*", re.ASCII)
RANGES_HINT = "give inclusive ranges inside [0, 65535] as START-END[,START-END...], e.g. 0-32767"


# -- Key_Shared sticky key and slot ------------------------------------------------------------
def sticky_key(ordering_key: bytes | str | None, key: str | None, producer_name: str | None,
               sequence_id: int | None, *, partition_key_b64_encoded: bool = False) -> bytes:
    """Commands.peekStickyKey / resolveStickyKey: the ordering key, else the partition key
    (Base64-decoded when it was set as bytes), else producerName + "-" + sequenceId, else
    NONE_KEY. None means "not set"; an empty key is set."""
    if ordering_key is not None:
        return java_utf8(ordering_key) if isinstance(ordering_key, str) else bytes(ordering_key)
    if key is not None:
        if partition_key_b64_encoded:
            try:
                return base64.b64decode(key, validate=True)
            except (binascii.Error, ValueError):
                # Java's decoder throws inside peekStickyKey's try, which returns NONE_KEY.
                return NONE_KEY
        return java_utf8(key)
    if producer_name is not None and sequence_id is not None:
        return java_utf8(f"{producer_name}-{sequence_id}")
    return NONE_KEY


def sticky_key_hash(key: bytes | str, range_start: int = 0,
                    range_end: int = DEFAULT_RANGE_SIZE - 1) -> int:
    """StickyKeyConsumerSelectorUtils.makeStickyKeyHash (4.x): the slot of a sticky key in the
    inclusive range [range_start, range_end]. Range.size() is end - start + 1 in
    pulsar-client-api's Range, so [0, 65535] gives h % 65536 and [1, 65535] gives h % 65535 + 1.
    A result of 0 (STICKY_KEY_HASH_NOT_SET) becomes 1."""
    slot = murmur3_32_hash(key) % (range_end - range_start + 1) + range_start
    return STICKY_KEY_HASH_NOT_SET + 1 if slot == STICKY_KEY_HASH_NOT_SET else slot


def _merge(ranges: list[list[int]]) -> list[tuple[int, int]]:
    """ConsumerHashAssignmentsSnapshot.mergeOverlappingRanges: joins touching ranges too."""
    out: list[list[int]] = []
    for s, e in sorted(ranges):
        if out and out[-1][1] >= s - 1:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def _by_consumer(assignments) -> dict[str, list[tuple[int, int]]]:
    """ConsumerHashAssignmentsSnapshot.getRangesByConsumer over (start, end, consumer)."""
    grouped: dict[str, list[list[int]]] = {}
    for s, e, c in assignments:
        grouped.setdefault(c, []).append([s, e])
    return {c: _merge(r) for c, r in grouped.items()}


class StickyKeyConsumerSelector:
    """The common interface."""
    policy = ""

    def add_consumer(self, name: str, **kw) -> None:
        raise NotImplementedError

    def remove_consumer(self, name: str) -> None:
        raise NotImplementedError

    def select(self, slot: int) -> str | None:
        raise NotImplementedError

    def consumers(self) -> list[str]:
        raise NotImplementedError

    def consumer_ranges(self) -> dict[str, list[tuple[int, int]]]:
        """Inclusive slot ranges per consumer, as Pulsar's keyHashRanges."""
        raise NotImplementedError

    def to_state(self) -> dict:
        raise NotImplementedError

    @classmethod
    def from_state(cls, data: dict):
        raise NotImplementedError

    def slot_of(self, key: bytes | str) -> int:
        return slot_of(self.policy, key)

    def select_key(self, key: bytes | str) -> str | None:
        return self.select(self.slot_of(key))

    def __contains__(self, name: str) -> bool:
        return name in self.consumers()

    def __len__(self) -> int:
        return len(self.consumers())


# -- auto-split --------------------------------------------------------------------------------
class AutoSplitSelector(StickyKeyConsumerSelector):
    """HashRangeAutoSplitStickyKeyConsumerSelector: rangeMap upperBound -> consumer. The first
    consumer takes {range_size: c}; each next one takes the lower half of the biggest range
    (the lowest one on a tie); a removed consumer's range goes to the consumer on its right
    (the top consumer's to the one below it). select(slot) = ceiling entry."""
    policy = AUTO_SPLIT

    def __init__(self, range_size: int = DEFAULT_RANGE_SIZE):
        if range_size < 2 or range_size & (range_size - 1):
            raise ValueError("range size must be a power of 2, at least 2")
        self.range_size = range_size
        self._keys: list[int] = []  # the upper bounds, ascending
        self._owner: dict[int, str] = {}  # rangeMap
        self._range: dict[str, int] = {}  # consumerRange

    def consumers(self) -> list[str]:
        return [self._owner[k] for k in self._keys]

    def add_consumer(self, name: str, **kw) -> None:
        if name in self._range:  # the same consumer again (a reconnect): keep its range
            return
        if not self._keys:
            self._put(self.range_size, name)
            return
        self._split(self._find_biggest_range(), name)

    def _put(self, key: int, name: str) -> None:
        if key not in self._owner:
            bisect.insort(self._keys, key)
        self._owner[key] = name
        self._range[name] = key

    def _delete(self, key: int) -> None:
        del self._owner[key]
        self._keys.pop(bisect.bisect_left(self._keys, key))

    def _find_biggest_range(self) -> int:
        slots, busiest, lower = 0, self.range_size, 0
        for k in self._keys:
            if k - lower > slots:  # strict: the lowest range wins a tie
                slots, busiest = k - lower, k
            lower = k
        return busiest

    def _split(self, upper: int, name: str) -> None:
        i = bisect.bisect_left(self._keys, upper)
        lower = self._keys[i - 1] if i else 0
        if upper - lower <= 1:
            raise ConsumerAssignError("No more range can assigned to new consumer, assigned "
                                      f"consumers {len(self._keys)}")
        self._put(upper - ((upper - lower) >> 1), name)

    def remove_consumer(self, name: str) -> None:
        key = self._range.pop(name, None)
        if key is None:
            return
        if key == self.range_size and len(self._keys) > 1:
            below = self._keys[-2]
            moved = self._owner[below]
            self._delete(below)
            self._owner[key] = moved
            self._range[moved] = key
        else:
            self._delete(key)

    def select(self, slot: int) -> str | None:
        i = bisect.bisect_left(self._keys, slot)
        return self._owner[self._keys[i]] if i < len(self._keys) else None

    def consumer_ranges(self) -> dict[str, list[tuple[int, int]]]:
        # As Pulsar reports them: [0, k1], [k1+1, k2], ..., [.., range_size]. The top bound
        # (65536) is one above the highest slot; Pulsar shows it that way too.
        out, start = [], 0
        for k in self._keys:
            out.append((start, k, self._owner[k]))
            start = k + 1
        return _by_consumer(out)

    def to_state(self) -> dict:
        return {"policy": self.policy, "rangeSize": self.range_size,
                "ranges": [[k, self._owner[k]] for k in self._keys]}

    @classmethod
    def from_state(cls, data: dict) -> "AutoSplitSelector":
        sel = cls(data.get("rangeSize", DEFAULT_RANGE_SIZE))
        for k, name in data.get("ranges", ()):
            sel._put(int(k), name)
        return sel


# -- consistent hashing ------------------------------------------------------------------------
class ConsumerNameIndexTracker:
    """Gives each consumer the lowest index not used by a current consumer with the same name,
    so that same-named consumers get different hash ring points."""

    def __init__(self):
        self._index: dict[str, tuple[str, int]] = {}  # consumer id -> (consumer name, index)
        self._used: dict[str, set[int]] = {}  # consumer name -> indexes in use

    def track(self, consumer_id: str, consumer_name: str, index: int | None = None) -> int:
        entry = self._index.get(consumer_id)
        if entry is not None:
            return entry[1]
        used = self._used.setdefault(consumer_name, set())
        if index is None:
            index = 0
            while index in used:  # RoaringBitmap.nextAbsentValue(0)
                index += 1
        used.add(index)
        self._index[consumer_id] = (consumer_name, index)
        return index

    def untrack(self, consumer_id: str) -> None:
        name, index = self._index.pop(consumer_id)
        used = self._used[name]
        used.discard(index)
        if not used:
            del self._used[name]

    def tracked(self, consumer_id: str) -> tuple[str, int] | None:
        return self._index.get(consumer_id)


class ConsistentHashingSelector(StickyKeyConsumerSelector):
    """ConsistentHashingStickyKeyConsumerSelector (4.x). Each consumer puts `points` points on
    a ring over slots [1, 65535], at makeStickyKeyHash(consumerName + "\\0" + nameIndex +
    "\\0" + i). On a collision the first consumer keeps the point and the later ones wait
    behind it in order, taking over when it leaves. select(slot) = ceiling point, else the
    first point."""
    policy = CONSISTENT_HASHING
    KEY_SEPARATOR = "\0"

    def __init__(self, points: int = DEFAULT_POINTS, range_max: int = MAX_SLOT):
        self.points = points
        self.range_start = STICKY_KEY_HASH_NOT_SET + 1
        self.range_end = range_max
        self._ring: dict[int, list[str]] = {}  # point -> [selected, colliding...]
        self._keys: list[int] | None = []  # sorted points, None when stale
        self._order: list[str] = []  # consumer ids in the order they were added
        self._tracker = ConsumerNameIndexTracker()

    def consumers(self) -> list[str]:
        return list(self._order)

    def _point(self, consumer_name: str, name_index: int, i: int) -> int:
        sep = self.KEY_SEPARATOR
        return sticky_key_hash(f"{consumer_name}{sep}{name_index}{sep}{i}", self.range_start,
                               self.range_end)

    def add_consumer(self, name: str, consumer_name: str | None = None,
                     name_index: int | None = None, **kw) -> None:
        """`name` identifies the consumer; `consumer_name` (default: name) is the Pulsar
        consumerName that is hashed, for callers with several consumers of one name."""
        if self._tracker.tracked(name) is not None:  # the same consumer again: no change
            return
        cname = name if consumer_name is None else consumer_name
        index = self._tracker.track(name, cname, name_index)
        for i in range(self.points):
            owners = self._ring.setdefault(self._point(cname, index, i), [])
            owners.append(name)  # putIfAbsent, else addCollidingConsumer
        self._order.append(name)
        self._keys = None

    def remove_consumer(self, name: str) -> None:
        entry = self._tracker.tracked(name)
        if entry is None:
            return
        cname, index = entry
        for i in range(self.points):
            p = self._point(cname, index, i)
            owners = self._ring.get(p)
            if owners is None:
                continue
            if name in owners:  # the first colliding consumer takes over
                owners.remove(name)
            if not owners:
                del self._ring[p]
        self._tracker.untrack(name)
        self._order.remove(name)
        self._keys = None

    def _sorted(self) -> list[int]:
        if self._keys is None:
            self._keys = sorted(self._ring)
        return self._keys

    def select(self, slot: int) -> str | None:
        keys = self._sorted()
        if not keys:
            return None
        i = bisect.bisect_left(keys, slot)
        return self._ring[keys[i] if i < len(keys) else keys[0]][0]

    def consumer_ranges(self) -> dict[str, list[tuple[int, int]]]:
        """internalGetConsumerHashAssignmentsSnapshot, then getRangesByConsumer."""
        keys = self._sorted()
        if not keys:
            return {}
        out: list[list] = []
        start, prev = self.range_start, None
        for k in keys:
            c = self._ring[k][0]
            if c == prev:
                out[-1][1] = k
            else:
                out.append([start, k, c])
            start, prev = k + 1, c
        last, first = keys[-1], self._ring[keys[0]][0]
        if last != self.range_end:  # the wrap-around goes to the first point's consumer
            if first == prev:
                out[-1][1] = self.range_end
            else:
                out.append([last + 1, self.range_end, first])
        return _by_consumer(out)

    def to_state(self) -> dict:
        # The ring is rebuilt by adding the consumers again in their order: collisions then
        # resolve as they did (the earliest current consumer holds a shared point).
        consumers = []
        for name in self._order:
            cname, index = self._tracker.tracked(name)
            consumers.append([name, cname, index])
        return {"policy": self.policy, "points": self.points, "rangeMax": self.range_end,
                "consumers": consumers}

    @classmethod
    def from_state(cls, data: dict) -> "ConsistentHashingSelector":
        sel = cls(data.get("points", DEFAULT_POINTS), data.get("rangeMax", MAX_SLOT))
        for name, cname, index in data.get("consumers", ()):
            sel.add_consumer(name, consumer_name=cname, name_index=int(index))
        return sel


# -- sticky (fixed ranges) ---------------------------------------------------------------------
def _fmt(r) -> str:
    return f"[{r[0]},{r[1]}]"


def validate_sticky_ranges(ranges) -> list[tuple[int, int]]:
    """A consumer's own ranges, checked as KeySharedPolicySticky.validate and
    HashRangeExclusiveStickyKeyConsumerSelector.validateKeySharedMeta do. InvalidValue (exit
    2) for an empty list, start > end, a bound outside [0, 65535] or an overlap of its own."""
    if not ranges:
        raise InvalidValue("Ranges for KeyShared policy must not be empty.", RANGES_HINT)
    out = []
    for r in ranges:
        try:
            s, e = (int(x) for x in r)
        except (TypeError, ValueError):
            raise InvalidValue(f"malformed hash range {r!r}", RANGES_HINT) from None
        if s > e:
            raise InvalidValue(f"Fixed hash range start > end for range: [{s},{e}]", RANGES_HINT)
        if s < 0 or e > MAX_SLOT:
            raise InvalidValue(f"Ranges must be [0, {MAX_SLOT}] but provided range is [{s}, {e}]",
                               RANGES_HINT)
        out.append((s, e))
    ordered = sorted(out, key=lambda r: r[0])  # stable, as List.sort by start
    for a, b in zip(ordered, ordered[1:]):
        if max(a[0], b[0]) <= min(a[1], b[1]):
            raise InvalidValue(f"Consumer's own ranges conflict: {_fmt(a)} overlaps with "
                               f"{_fmt(b)}", RANGES_HINT)
    return out


def parse_sticky_ranges(text: str) -> list[tuple[int, int]]:
    """"0-32767,32768-65535" -> [(0, 32767), (32768, 65535)], validated."""
    if not text.strip():
        return validate_sticky_ranges([])
    out = []
    for part in text.split(","):
        m = _RANGE_RE.fullmatch(part)
        if m is None:
            raise InvalidValue(f"malformed hash range {part.strip()!r} in {text!r}", RANGES_HINT)
        out.append((int(m[1]), int(m[2])))
    return validate_sticky_ranges(out)


class StickySelector(StickyKeyConsumerSelector):
    """HashRangeExclusiveStickyKeyConsumerSelector: consumers bring their own inclusive ranges,
    which may not overlap another consumer's. select(slot) = the range starting at or below
    the slot if it holds the slot, else None (the message waits: nobody owns the slot)."""
    policy = STICKY

    def __init__(self):
        self._starts: list[int] = []  # rangeMap keys, ascending
        self._at: dict[int, tuple[int, int, str]] = {}  # start -> (start, end, consumer)
        self._ranges: dict[str, list[tuple[int, int]]] = {}  # consumer -> ranges, as given

    def consumers(self) -> list[str]:
        return list(self._ranges)

    def _conflict(self, ranges, exclude: str) -> tuple[str, tuple[int, int]] | None:
        """findConflictingConsumer: for each new range, the existing range at or below its
        start (floorEntry), then the one at or above it (ceilingEntry)."""
        starts = self._starts
        if exclude in self._ranges:  # replacing: its own old ranges do not count
            starts = [k for k in starts if self._at[k][2] != exclude]
        for s, e in ranges:
            i = bisect.bisect_right(starts, s)
            floor = i - 1 if i else None
            ceiling = i - 1 if i and starts[i - 1] == s else (i if i < len(starts) else None)
            for j in (floor, ceiling):
                if j is not None:
                    os_, oe, owner = self._at[starts[j]]
                    if max(s, os_) <= min(e, oe):
                        return owner, (os_, oe)
        return None

    def add_consumer(self, name: str, ranges=None, **kw) -> None:
        """Adding a consumer that is here already replaces its ranges (if they fit)."""
        ranges = validate_sticky_ranges(ranges)
        hit = self._conflict(ranges, exclude=name)
        if hit is not None:
            owner, (os_, oe) = hit
            raise ConsumerAssignError(
                f"Range conflict with consumer {owner}",
                f"consumer '{owner}' owns [{os_}, {oe}]; choose ranges that do not overlap it")
        self.remove_consumer(name)
        for s, e in ranges:
            bisect.insort(self._starts, s)
            self._at[s] = (s, e, name)
        self._ranges[name] = list(ranges)

    def remove_consumer(self, name: str) -> None:
        for s, _ in self._ranges.pop(name, ()):
            del self._at[s]
            self._starts.pop(bisect.bisect_left(self._starts, s))

    def select(self, slot: int) -> str | None:
        i = bisect.bisect_right(self._starts, slot) - 1
        if i < 0:
            return None
        s, e, owner = self._at[self._starts[i]]
        return owner if s <= slot <= e else None

    def consumer_ranges(self) -> dict[str, list[tuple[int, int]]]:
        return _by_consumer(self._at[s] for s in self._starts)

    def to_state(self) -> dict:
        return {"policy": self.policy,
                "consumers": [[n, [[s, e] for s, e in r]] for n, r in self._ranges.items()]}

    @classmethod
    def from_state(cls, data: dict) -> "StickySelector":
        sel = cls()
        for name, ranges in data.get("consumers", ()):
            sel.add_consumer(name, ranges=[tuple(r) for r in ranges])
        return sel


# -- factory -----------------------------------------------------------------------------------
_CLASSES = {AUTO_SPLIT: AutoSplitSelector, CONSISTENT_HASHING: ConsistentHashingSelector,
            STICKY: StickySelector}


def _check_policy(policy: str):
    return one_of(_CLASSES, policy, "Key_Shared selector")


def make_selector(policy: str, state: dict | None = None) -> StickyKeyConsumerSelector:
    """A new selector for a policy name, or the one saved as `state`."""
    cls = _check_policy(policy)
    if state is None:
        return cls()
    saved = state.get("policy", policy)
    if saved != policy:
        raise ValueError(f"state of a {saved!r} selector given for {policy!r}")
    return cls.from_state(state)


def slot_of(policy: str, sticky_key_bytes: bytes | str) -> int:
    """The slot of a sticky key under a policy: [1, 65535] for consistent hashing (h % 65535 +
    1), else h % 65536 with 0 -> 1."""
    _check_policy(policy)
    if policy == CONSISTENT_HASHING:
        return sticky_key_hash(sticky_key_bytes, STICKY_KEY_HASH_NOT_SET + 1, MAX_SLOT)
    return sticky_key_hash(sticky_key_bytes, 0, MAX_SLOT)
