"""The Accept header as Kubernetes clients write it: media ranges with parameters
(`application/json;as=Table;v=v1;g=meta.k8s.io`), in the client's order of
preference (q values respected; equal q keep their order)."""
from dataclasses import dataclass, field


@dataclass(frozen=True)
class MediaRange:
    type: str                       # "application/json", lower case
    params: dict = field(default_factory=dict)
    q: float = 1.0


def accepts(header):
    """The media ranges of an Accept header, best first; [] when there is none."""
    out = []
    for index, part in enumerate((header or "").split(",")):
        pieces = [p.strip() for p in part.split(";")]
        if not pieces[0]:
            continue
        params, q = {}, 1.0
        for piece in pieces[1:]:
            key, _, value = piece.partition("=")
            key, value = key.strip().lower(), value.strip().strip('"')
            if key == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
            elif key:
                params[key] = value
        if q > 0:
            out.append((-q, index, MediaRange(pieces[0].lower(), params, q)))
    return [m for _, _, m in sorted(out, key=lambda t: (t[0], t[1]))]
