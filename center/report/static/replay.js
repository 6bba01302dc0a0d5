// An offline replay page: one step (turn) shown at a time, chosen with the slider, the buttons,
// the arrow keys or the address's #turn-N; "play" advances one step a second.
(function () {
  "use strict";
  const steps = Array.from(document.querySelectorAll("section.step"));
  const slider = document.getElementById("turn");
  if (!slider || steps.length === 0) {
    return;
  }
  const label = document.getElementById("turn-label");
  const play = document.getElementById("play");
  let timer = null;

  function show(index) {
    const k = Math.max(0, Math.min(steps.length - 1, index));
    steps.forEach(function (step, n) { step.hidden = n !== k; });
    slider.value = String(k);
    label.textContent = steps[k].dataset.title + " (" + (k + 1) + "/" + steps.length + ")";
    if (window.location.hash !== "#turn-" + k) {
      try {
        window.history.replaceState(null, "", "#turn-" + k);
      } catch (error) {
        // Some browsers refuse history changes on file: pages; the address then just stays.
      }
    }
    if (k === steps.length - 1) {
      stop();
    }
  }

  function current() {
    return parseInt(slider.value, 10) || 0;
  }

  function stop() {
    if (timer !== null) {
      window.clearInterval(timer);
      timer = null;
    }
    play.textContent = "play";
  }

  slider.addEventListener("input", function () { show(current()); });
  document.getElementById("first").addEventListener("click", function () { show(0); });
  document.getElementById("prev").addEventListener("click", function () { show(current() - 1); });
  document.getElementById("next").addEventListener("click", function () { show(current() + 1); });
  document.getElementById("last").addEventListener("click", function () { show(steps.length - 1); });
  play.addEventListener("click", function () {
    if (timer !== null) {
      stop();
      return;
    }
    if (current() === steps.length - 1) {
      show(0);
    }
    play.textContent = "pause";
    timer = window.setInterval(function () { show(current() + 1); }, 1000);
  });
  document.addEventListener("keydown", function (event) {
    if (event.target instanceof HTMLInputElement && event.target !== slider) {
      return;
    }
    const moves = { ArrowLeft: -1, ArrowRight: 1 };
    if (event.key in moves && event.target !== slider) {
      show(current() + moves[event.key]);
    } else if (event.key === "Home") {
      show(0);
    } else if (event.key === "End") {
      show(steps.length - 1);
    } else {
      return;
    }
    event.preventDefault();
  });
  const match = /^#turn-(\d+)$/.exec(window.location.hash);
  show(match ? parseInt(match[1], 10) : 0);
}());
