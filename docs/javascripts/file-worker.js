// Search runs in a Web Worker, which a page opened from the file system (file://) may not start:
// such pages have no origin to share with the worker's script. There, and only there, a worker is
// run in a hidden frame of the page's own origin instead, messages passed both ways as a worker's
// are. (The search index itself comes as a script there: scripts/docs_hooks.py.)
(function () {
  "use strict";
  if (location.protocol !== "file:") {
    return;
  }
  var frames = [];

  function FileWorker(url) {
    var self = this;
    var listeners = document.createElement("span"); // an event target for "message" listeners
    var queue = [];
    var ready = false;
    var frame = document.createElement("iframe");
    var id = frames.push(self) - 1;

    self.onmessage = null;
    self.onerror = null;
    self.addEventListener = listeners.addEventListener.bind(listeners);
    self.removeEventListener = listeners.removeEventListener.bind(listeners);

    function deliver(data) {
      // a copy made in the frame's own realm, as a worker would receive it
      var inside = frame.contentWindow;
      inside.dispatchEvent(new inside.MessageEvent("message", { data: inside.structuredClone(data) }));
    }

    self.postMessage = function (data) {
      if (ready) {
        deliver(data);
      } else {
        queue.push(data);
      }
    };
    self.terminate = function () {
      frame.remove();
    };
    self.receive = function (data) {
      var event = new MessageEvent("message", { data: structuredClone(data) });
      listeners.dispatchEvent(event);
      if (typeof self.onmessage === "function") {
        self.onmessage(event);
      }
    };

    frame.hidden = true;
    frame.srcdoc = "<!DOCTYPE html><meta charset=\"utf-8\"><script>" +
      "self.postMessage = function (data) { parent.nbstreamFileWorkers[" + id + "].receive(data); };" +
      "<\/script><script src=\"" + new URL(url, location.href).href + "\"><\/script>";
    frame.addEventListener("load", function () {
      ready = true;
      queue.splice(0).forEach(deliver);
    });
    (document.body || document.documentElement).appendChild(frame);
  }

  window.nbstreamFileWorkers = frames;
  window.Worker = FileWorker;
})();
