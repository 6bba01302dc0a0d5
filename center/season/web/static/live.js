// The season's pages update themselves: every few seconds the page's API document is fetched
// and the page's tables are rebuilt from it. Text is only ever written with textContent.
(function () {
  "use strict";
  var body = document.body;
  var api = body.dataset.api;
  var page = body.dataset.page;
  var every = Number(body.dataset.refresh) || 3000;

  function el(tag, cls, children) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    (children || []).forEach(function (c) {
      node.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
    });
    return node;
  }
  function td(cls, children) { return el("td", cls, children); }
  function link(href, cls, text) { var a = el("a", cls, [text]); a.href = href; return a; }
  function fill(id, rows) { var t = document.getElementById(id); if (t) t.replaceChildren.apply(t, rows); }
  function text(id, value) { var n = document.getElementById(id); if (n) n.textContent = value; }
  function entryPath(entry) { return "/entries/" + encodeURIComponent(entry); }
  function rating(v) { return v === null ? "–" : v.toFixed(0); }
  function gxe(v) { return v === null ? "–" : (100 * v).toFixed(1) + "%"; }
  function seconds(v) { return v < 120 ? v.toFixed(0) + " s" : (v / 60).toFixed(0) + " min"; }
  var TONES = JSON.parse(body.dataset.tones || "{}");  // the status table's tones
  function status(s) { return el("span", "status status-" + (TONES[s] || ""), [s]); }

  function season(s) {
    text("battles", String(s.battles));
    text("flags", s.closed_at ? " · closed at " + s.closed_at : s.closing ? " · closing" : s.paused ? " · paused" : "");
    text("updated", s.generated_at);
    var box = document.getElementById("alarms");
    box.replaceChildren.apply(box, s.alarms.map(function (a) { return el("p", "", ["ALARM: " + a]); }));
    box.hidden = s.alarms.length === 0;
  }

  function standingRow(r) {
    var who = [link(entryPath(r.entry), "cand", r.name), " ", el("span", "cid", [r.entry])];
    if (r.baseline) who.push(" ", el("span", "tag", ["baseline"]));
    if (r.provisional) who.push(" ", el("span", "tag provisional", ["provisional"]));
    var failed = Object.keys(r.failures).filter(function (s) { return r.failures[s]; });
    var state = [r.state];
    if (r.cause && r.state !== "active") state.push(" ", el("span", "cid", [r.cause]));
    var tr = el("tr", "", [
      td("num", [String(r.rank)]), td("", who), td("", [r.participant]),
      td("num", [rating(r.rating)]),
      td("num", [r.rating_lo !== null && r.rating_hi !== null ? "[" + rating(r.rating_lo) + ", " + rating(r.rating_hi) + "]" : "–"]),
      td("num", r.gxe_lo !== null && r.gxe_hi !== null ? [gxe(r.gxe), " ", el("span", "cid", ["[" + gxe(r.gxe_lo) + ", " + gxe(r.gxe_hi) + "]"])] : [gxe(r.gxe)]),
      td("num", [String(r.wins)]), td("num", [String(r.losses)]),
      td("num", [String(r.ties)]), td("num", [String(r.battles)]),
      td("", [failed.length ? failed.map(function (s) { return s + " " + r.failures[s]; }).join(", ") : "–"]),
      td("", state),
    ]);
    tr.dataset.entry = r.entry;
    return tr;
  }

  function board(doc) {
    var sections = document.querySelectorAll("section.board");
    doc.boards.forEach(function (b) {
      sections.forEach(function (section) {
        if (section.dataset.format !== b.format) return;
        section.querySelector(".at").textContent = b.at || "not yet";
        section.querySelector(".n").textContent = String(b.battles);
        var tbody = section.querySelector("tbody");
        tbody.replaceChildren.apply(tbody, b.rows.map(standingRow));
      });
    });
  }

  function queue(doc) {
    fill("submissions", doc.submissions.map(function (s) {
      return el("tr", "", [td("", [link(entryPath(s.entry), "cand", s.entry)]), td("", [s.participant]), td("", [s.state]), td("", [s.at])]);
    }));
    text("waiting", String(doc.waiting));
    fill("running", doc.running.map(function (r) {
      return el("tr", "", [td("", [r.battle_id]), td("", [r.format]), td("", [r.kind]), td("side-blue", [r.blue]), td("side-red", [r.red]), td("num", [seconds(r.age_s)])]);
    }));
    fill("edges", doc.edges.map(function (e) {
      return el("tr", "", [td("", [e.side]), td("", [e.trusted ? "the organizer" : "the participant (untrusted)"]), td("", [e.answering ? "yes" : "no"]), td("", [e.last_answer_at || "–"])]);
    }));
    fill("retrying", doc.retrying.map(function (r) {
      return el("tr", "", [td("", [r.battle_id]), td("num", [String(r.voids)]), td("", [r.given_up ? "given up" : r.not_before])]);
    }));
    fill("voids", doc.voids.map(function (v) {
      return el("tr", "", [td("", [v.battle_id]), td("", [v.at]), td("", [v.cause])]);
    }));
  }

  function battleRow(b) {
    var mine = [status(b.status)];
    if (b.cause) mine.push(" " + b.cause);
    if (b.charged) mine.push(" · charged");
    var theirs = [status(b.opponent_status)];
    if (b.opponent_cause) theirs.push(" " + b.opponent_cause);
    return el("tr", "", [
      td("", [b.finished_at]), td("", [b.battle_id]), td("", [b.format]), td("side-" + b.side, [b.side]),
      td("", [link(entryPath(b.opponent), "cand", b.opponent_name)]),
      td("", [b.result + " (" + b.end_reason + ", " + b.turns + " turns)"]),
      td("", mine), td("", theirs), td("", [link(b.replay, "", "replay")]),
    ]);
  }

  function entry(doc) {
    text("state", doc.state);
    text("cause", doc.cause);
    text("shown", String(doc.battles.length));
    text("battle-count", String(doc.battle_count));
    fill("qualification", doc.qualification.map(battleRow));
    fill("battles", doc.battles.map(battleRow));
  }

  var RENDER = {board: board, queue: queue, entry: entry};

  function refresh() {
    fetch(api, {cache: "no-store", headers: {accept: "application/json"}})
      .then(function (r) { if (!r.ok) throw new Error(api + ": " + r.status); return r.json(); })
      .then(function (doc) { season(doc.season); RENDER[page](doc); body.dataset.updates = String(Number(body.dataset.updates || 0) + 1); })
      .catch(function (e) { body.dataset.failedUpdate = String(e); })
      .then(function () { setTimeout(refresh, every); });
  }
  setTimeout(refresh, every);
})();
