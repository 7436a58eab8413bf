(function () {
  "use strict";
  var $$ = function (sel, root) { return Array.prototype.slice.call((root || document).querySelectorAll(sel)); };
  var input = document.getElementById("search");
  var counter = document.getElementById("search-count");
  var noMatch = document.getElementById("no-match");
  var findings = $$(".finding");
  var sections = $$("details.section");
  var frames = $$(".frame");
  var allDetails = $$("details");
  var saved = null; // the open state of every <details> before the filter or a print opened them

  function save() { return allDetails.map(function (d) { return d.open; }); }
  function restore(state) { allDetails.forEach(function (d, i) { d.open = state[i]; }); }
  function text(el) {
    if (el.cdText === undefined) {
      el.cdText = (el.textContent + " " + (el.getAttribute("data-search") || "")).toLowerCase().replace(/\s+/g, " ");
    }
    return el.cdText;
  }
  function matches(el, words) {
    var t = text(el);
    return words.every(function (w) { return t.indexOf(w) !== -1; });
  }
  function openUp(el) {
    for (var n = el; n; n = n.parentElement) { if (n.tagName === "DETAILS") { n.open = true; } }
  }

  function filter() {
    var words = input.value.toLowerCase().split(/\s+/).filter(Boolean);
    var active = words.length > 0;
    if (active && saved === null) { saved = save(); }
    var shown = 0;
    findings.forEach(function (el) {
      var hit = !active || matches(el, words);
      el.classList.toggle("filtered", !hit);
      if (!hit) { return; }
      shown++;
      if (active) {
        openUp(el);
        $$("details", el).forEach(function (d) { if (words.some(function (w) { return text(d).indexOf(w) !== -1; })) { d.open = true; } });
      }
    });
    frames.forEach(function (f) { f.classList.toggle("filtered", active && !f.querySelector(".finding:not(.filtered)")); });
    sections.forEach(function (s) { s.classList.toggle("filtered", active && !s.querySelector(".finding:not(.filtered)")); });
    if (!active && saved !== null) { restore(saved); saved = null; }
    counter.textContent = active ? shown + " of " + findings.length + " shown" : findings.length + " findings";
    noMatch.hidden = !(active && shown === 0);
  }

  function reveal(id) {
    var target = id && document.getElementById(id);
    if (target) { openUp(target); target.scrollIntoView({ block: "start" }); }
  }

  input.addEventListener("input", filter);
  input.addEventListener("keydown", function (e) {
    if (e.key === "Escape") { input.value = ""; filter(); input.blur(); }
  });
  document.addEventListener("keydown", function (e) {
    var typing = /^(INPUT|TEXTAREA|SELECT)$/.test((e.target && e.target.tagName) || "");
    if (e.key === "/" && !typing && !e.ctrlKey && !e.metaKey && !e.altKey) { e.preventDefault(); input.focus(); input.select(); }
  });
  document.getElementById("expand-all").addEventListener("click", function () {
    allDetails.forEach(function (d) { d.open = true; });
  });
  document.getElementById("collapse-all").addEventListener("click", function () {
    allDetails.forEach(function (d) { d.open = false; });
  });
  document.addEventListener("click", function (e) {
    var a = e.target && e.target.closest ? e.target.closest("a[href^='#']") : null;
    if (a) { e.preventDefault(); reveal(a.getAttribute("href").slice(1)); }
  });
  // Printing shows every section expanded (the print stylesheet does too, where supported).
  var beforePrint = null;
  window.addEventListener("beforeprint", function () {
    beforePrint = save();
    allDetails.forEach(function (d) { d.open = true; });
  });
  window.addEventListener("afterprint", function () {
    if (beforePrint !== null) { restore(beforePrint); beforePrint = null; }
  });
  // A sortable table: a click on a column's head sorts by it (numbers by data-value), again to reverse.
  document.querySelectorAll("table.sortable").forEach(function (table) {
    table.querySelectorAll("thead th").forEach(function (th, col) {
      th.style.cursor = "pointer";
      th.addEventListener("click", function () {
        var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
        var down = th.getAttribute("data-down") !== "1";
        th.setAttribute("data-down", down ? "1" : "0");
        function key(row) {
          var cell = row.cells[col], v = cell.getAttribute("data-value");
          var n = parseFloat(v !== null ? v : cell.textContent);
          return isNaN(n) ? cell.textContent.trim() : n;
        }
        rows.sort(function (a, b) {
          var x = key(a), y = key(b), c = x < y ? -1 : x > y ? 1 : 0;
          return down ? -c : c;
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  });
  if (location.hash.length > 1) { reveal(decodeURIComponent(location.hash.slice(1))); }
  filter();
})();
