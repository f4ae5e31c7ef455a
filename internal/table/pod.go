package table

import (
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// podRow is a Pod with what its READY, STATUS and RESTARTS cells are computed from.
type podRow struct {
	corev1.Pod
	ready, total int
	status       string
	restarts     int
	lastRestart  time.Time
}

func pods() *Printer {
	return kind[podRow]{
		prepare:       summarizePod,
		conditions:    podConditions,
		statusMembers: podStatusMembers,
		keyMembers:    podKeyMembers,
		keys: map[string]func(*podRow) (string, bool){
			// Ready containers, then all of them: 0/3 < 1/1 < 1/3 < 2/2.
			"Ready": func(p *podRow) (string, bool) { return numKey(int64(p.ready), int64(p.total)), true },
			// The count alone: "(5m ago)" moves with the clock.
			"Restarts": func(p *podRow) (string, bool) { return numKey(int64(p.restarts)), true },
		},
		columns: []column[podRow]{
			{nameColumn(), func(p *podRow, _ time.Time) any { return p.Name }},
			{str("Ready", "The aggregate readiness state of this pod for accepting traffic."),
				func(p *podRow, _ time.Time) any { return fmt.Sprintf("%d/%d", p.ready, p.total) }},
			{str("Status", "The aggregate status of the containers in this pod."),
				func(p *podRow, _ time.Time) any { return p.status }},
			{str("Restarts", "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted."),
				func(p *podRow, now time.Time) any {
					if p.restarts == 0 || p.lastRestart.IsZero() {
						return strconv.Itoa(p.restarts)
					}
					return fmt.Sprintf("%d (%s ago)", p.restarts, since(metav1.NewTime(p.lastRestart), now))
				}},
			{ageColumn(), func(p *podRow, now time.Time) any { return since(p.CreationTimestamp, now) }},
			{wide(str("IP", corev1.PodStatus{}.SwaggerDoc()["podIP"])), func(p *podRow, _ time.Time) any {
				ip := p.Status.PodIP
				if len(p.Status.PodIPs) > 0 {
					ip = p.Status.PodIPs[0].IP
				}
				return orNone(ip)
			}},
			{wide(str("Node", corev1.PodSpec{}.SwaggerDoc()["nodeName"])),
				func(p *podRow, _ time.Time) any { return orNone(p.Spec.NodeName) }},
			{wide(str("Nominated Node", corev1.PodStatus{}.SwaggerDoc()["nominatedNodeName"])),
				func(p *podRow, _ time.Time) any { return orNone(p.Status.NominatedNodeName) }},
			{wide(str("Readiness Gates", corev1.PodSpec{}.SwaggerDoc()["readinessGates"])), readinessGates},
		},
	}.printer()
}

// summarizePod works out READY, STATUS and RESTARTS the way kubectl has always shown them. STATUS is
// the most telling reason: the phase, overridden by the first init container that has not finished,
// else by the regular containers' waiting or terminated reasons, else by the Pod being deleted.
// Restartable init containers (sidecars) count as containers once started.
func summarizePod(p *podRow) {
	st := &p.Status
	p.status = string(st.Phase)
	if st.Reason != "" {
		p.status = st.Reason
	}
	for _, c := range st.Conditions {
		if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonSchedulingGated {
			p.status = corev1.PodReasonSchedulingGated
		}
	}

	p.total = len(p.Spec.Containers)
	sidecars := map[string]bool{}
	for _, c := range p.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sidecars[c.Name] = true
			p.total++
		}
	}

	// Restarts of init containers count only while the Pod is still initializing; afterwards only
	// sidecars and regular containers do.
	var sidecarRestarts int
	var sidecarLastRestart time.Time
	initializing := false
	for i, c := range st.InitContainerStatuses {
		p.restarts += int(c.RestartCount)
		finished := lastFinished(c)
		p.lastRestart = later(p.lastRestart, finished)
		if sidecars[c.Name] {
			sidecarRestarts += int(c.RestartCount)
			sidecarLastRestart = later(sidecarLastRestart, finished)
		}
		if t := c.State.Terminated; t != nil && t.ExitCode == 0 {
			continue
		}
		if sidecars[c.Name] && c.Started != nil && *c.Started {
			if c.Ready {
				p.ready++
			}
			continue
		}
		initializing = true
		switch t, w := c.State.Terminated, c.State.Waiting; {
		case t != nil && t.Reason != "":
			p.status = "Init:" + t.Reason
		case t != nil && t.Signal != 0:
			p.status = fmt.Sprintf("Init:Signal:%d", t.Signal)
		case t != nil:
			p.status = fmt.Sprintf("Init:ExitCode:%d", t.ExitCode)
		case w != nil && w.Reason != "" && w.Reason != "PodInitializing":
			p.status = "Init:" + w.Reason
		default:
			p.status = fmt.Sprintf("Init:%d/%d", i, len(p.Spec.InitContainers))
		}
		break
	}

	if !initializing || podCondition(st.Conditions, corev1.PodInitialized) == corev1.ConditionTrue {
		p.restarts, p.lastRestart = sidecarRestarts, sidecarLastRestart
		running, errorReason := false, ""
		// Backwards, so that the first container's reason wins.
		for i := len(st.ContainerStatuses) - 1; i >= 0; i-- {
			c := st.ContainerStatuses[i]
			p.restarts += int(c.RestartCount)
			p.lastRestart = later(p.lastRestart, lastFinished(c))
			switch t, w := c.State.Terminated, c.State.Waiting; {
			case w != nil && w.Reason != "":
				p.status = w.Reason
			case t != nil:
				switch {
				case t.Reason != "":
					p.status = t.Reason
				case t.Signal != 0:
					p.status = fmt.Sprintf("Signal:%d", t.Signal)
				default:
					p.status = fmt.Sprintf("ExitCode:%d", t.ExitCode)
				}
				if t.ExitCode != 0 {
					errorReason = p.status
				}
			case c.Ready && c.State.Running != nil:
				running = true
				p.ready++
			}
		}
		// A container that completed does not make a Pod whose other containers still run Completed.
		if p.status == "Completed" {
			switch {
			case running && podReady(st.Conditions):
				p.status = "Running"
			case errorReason != "":
				p.status = errorReason
			case running:
				p.status = "NotReady"
			}
		}
	}

	if p.DeletionTimestamp != nil {
		switch {
		case st.Reason == "NodeLost": // the node controller's reason for Pods of an unreachable node
			p.status = "Unknown"
		case st.Phase != corev1.PodSucceeded && st.Phase != corev1.PodFailed:
			p.status = "Terminating"
		}
	}
}

func lastFinished(c corev1.ContainerStatus) time.Time {
	if t := c.LastTerminationState.Terminated; t != nil {
		return t.FinishedAt.Time
	}
	return time.Time{}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// podCondition is the status of the first condition of that type, "" if there is none.
func podCondition(conds []corev1.PodCondition, typ corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range conds {
		if c.Type == typ {
			return c.Status
		}
	}
	return ""
}

// podReady tells whether any Ready condition is true.
func podReady(conds []corev1.PodCondition) bool {
	for _, c := range conds {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// readinessGates is "true/total" over the Pod's readiness gates, counting the first condition of each
// gate's type.
func readinessGates(p *podRow, _ time.Time) any {
	if len(p.Spec.ReadinessGates) == 0 {
		return "<none>"
	}
	ok := 0
	for _, g := range p.Spec.ReadinessGates {
		if podCondition(p.Status.Conditions, g.ConditionType) == corev1.ConditionTrue {
			ok++
		}
	}
	return fmt.Sprintf("%d/%d", ok, len(p.Spec.ReadinessGates))
}

func podConditions(p *podRow) []metav1.TableRowCondition {
	switch p.Status.Phase {
	case corev1.PodSucceeded:
		return []metav1.TableRowCondition{{Type: metav1.RowCompleted, Status: metav1.ConditionTrue,
			Reason: string(corev1.PodSucceeded), Message: "The pod has completed successfully."}}
	case corev1.PodFailed:
		return []metav1.TableRowCondition{{Type: metav1.RowCompleted, Status: metav1.ConditionTrue,
			Reason: string(corev1.PodFailed), Message: "The pod failed."}}
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}
