// The battles table of report.html: filters (candidate, result, status) and sorting by column.
(function () {
  "use strict";
  const table = document.getElementById("battles-table");
  if (!table) {
    return;
  }
  const body = table.tBodies[0];
  const rows = Array.from(body.rows);
  const candidate = document.getElementById("filter-candidate");
  const result = document.getElementById("filter-result");
  const status = document.getElementById("filter-status");
  const count = document.getElementById("battle-count");

  function sidesOf(row, who) {
    if (!who) {
      return ["blue", "red"];
    }
    return ["blue", "red"].filter(function (side) { return row.dataset[side] === who; });
  }

  function matches(row) {
    const who = candidate.value;
    const sides = sidesOf(row, who);
    if (who && sides.length === 0) {
      return false;
    }
    const winner = row.dataset.winner;
    switch (result.value) {
      case "win":
        if (!who || sides.indexOf(winner) < 0) { return false; }
        break;
      case "loss":
        if (!who || (winner !== "blue" && winner !== "red") || sides.indexOf(winner) >= 0) { return false; }
        break;
      case "":
        break;
      default:
        if (winner !== result.value) { return false; }
    }
    if (status.value) {
      const found = sides.map(function (side) { return row.dataset[side + "Status"]; });
      const ok = status.value === "failed"
        ? found.some(function (s) { return s !== "OK"; })
        : found.indexOf(status.value) >= 0;
      if (!ok) { return false; }
    }
    return true;
  }

  function apply() {
    let shown = 0;
    rows.forEach(function (row) {
      const keep = matches(row);
      row.hidden = !keep;
      if (keep) { shown += 1; }
    });
    count.textContent = shown + " of " + rows.length + " battles";
  }

  [candidate, result, status].forEach(function (select) { select.addEventListener("change", apply); });

  function cellValue(row, index, numeric) {
    const cell = row.cells[index];
    const raw = cell.dataset.sort !== undefined ? cell.dataset.sort : cell.textContent.trim();
    return numeric ? parseFloat(raw) || 0 : raw.toLowerCase();
  }

  Array.from(table.tHead.rows[0].cells).forEach(function (th, index) {
    const button = th.querySelector("button");
    if (!button) {
      return;
    }
    button.addEventListener("click", function () {
      const numeric = th.dataset.type === "num";
      const ascending = th.getAttribute("aria-sort") !== "ascending";
      Array.from(table.tHead.rows[0].cells).forEach(function (other) { other.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
      const sorted = rows.slice().sort(function (a, b) {
        const x = cellValue(a, index, numeric);
        const y = cellValue(b, index, numeric);
        const order = x < y ? -1 : x > y ? 1 : 0;
        return ascending ? order : -order;
      });
      sorted.forEach(function (row) { body.appendChild(row); });
    });
  });
  apply();
}());
