package document

import "github.com/tidwall/gjson"

// pod writes a Pod's fields: node, IPs, QoS class, containers and images, restarts (as kubectl
// counts them) and the Ready condition. podTemplate and containers serve the workload kinds too.
func (w *docWriter) pod(sp *[spCount]gjson.Result, st *[stCount]gjson.Result, text *stringSet) {
	if n := sp[spNodeName].Str; n != "" {
		w.str(FieldNodeName, n)
		text.add(n)
	}
	w.ips(FieldPodIP, st[stPodIPs], "ip", st[stPodIP])
	w.ips(FieldHostIP, st[stHostIPs], "ip", st[stHostIP])
	if q := st[stQOSClass].Str; q != "" {
		w.str(FieldQOSClass, q)
	}
	w.containers((*[3]gjson.Result)(sp[spInitContainers:spEphemeralContainers+1]), text)
	// As kubectl's RESTARTS column: regular and init containers.
	var restarts int64
	for _, list := range [...]gjson.Result{st[stContainerStatuses], st[stInitContainerStatuses]} {
		forEach(list, func(_, cs gjson.Result) bool {
			restarts += cs.Get("restartCount").Int()
			return true
		})
	}
	w.int(FieldRestarts, restarts)
	w.bool(FieldReady, conditionTrue(st[stConditions], "Ready"))
}

// podTemplate writes containerNames and images of the Pod spec of a workload's template.
func (w *docWriter) podTemplate(spec gjson.Result, text *stringSet) {
	if !spec.IsObject() {
		return
	}
	var lists [3]gjson.Result
	pick(spec, containerKeys[:], lists[:])
	w.containers(&lists, text)
}

// containers writes containerNames and images of the init, regular and ephemeral containers.
func (w *docWriter) containers(lists *[3]gjson.Result, text *stringSet) {
	var nameBuf, imageBuf [16]string
	names, images := stringSet{items: nameBuf[:0]}, stringSet{items: imageBuf[:0]}
	for _, list := range lists {
		forEach(list, func(_, c gjson.Result) bool {
			forEach(c, func(k, val gjson.Result) bool {
				switch k.Str {
				case "name":
					names.add(val.Str)
				case "image":
					images.add(val.Str)
				}
				return true
			})
			return true
		})
	}
	l := w.list(FieldContainerNames)
	for _, s := range names.items {
		l.add(s)
		text.add(s)
	}
	l.end()
	l = w.list(FieldImages)
	for _, s := range images.items {
		l.add(s)
		text.add(s)
	}
	l.end()
}
