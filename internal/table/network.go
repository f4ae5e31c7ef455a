package table

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
)

func services() *Printer {
	type T = corev1.Service
	doc := corev1.ServiceSpec{}.SwaggerDoc()
	return kind[T]{columns: []column[T]{
		{nameColumn(), func(o *T, _ time.Time) any { return o.Name }},
		{str("Type", doc["type"]), func(o *T, _ time.Time) any { return string(o.Spec.Type) }},
		{str("Cluster-IP", doc["clusterIP"]), func(o *T, _ time.Time) any {
			if len(o.Spec.ClusterIPs) > 0 {
				return o.Spec.ClusterIPs[0]
			}
			return orNone(o.Spec.ClusterIP)
		}},
		{str("External-IP", doc["externalIPs"]), func(o *T, _ time.Time) any { return serviceExternalIP(o) }},
		{str("Port(s)", doc["ports"]), func(o *T, _ time.Time) any { return orNone(servicePorts(o.Spec.Ports)) }},
		{ageColumn(), func(o *T, now time.Time) any { return since(o.CreationTimestamp, now) }},
		{wide(str("Selector", doc["selector"])), func(o *T, _ time.Time) any { return labels.FormatLabels(o.Spec.Selector) }},
	}}.printer()
}

// serviceExternalIP is what a Service is reached at from outside: its external IPs, for a load
// balancer also the balancer's addresses (<pending> until it has some), for ExternalName the name.
func serviceExternalIP(s *corev1.Service) string {
	switch s.Spec.Type {
	case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort:
		if len(s.Spec.ExternalIPs) > 0 {
			return strings.Join(s.Spec.ExternalIPs, ",")
		}
		return "<none>"
	case corev1.ServiceTypeLoadBalancer:
		addrs := loadBalancerAddresses(s.Status.LoadBalancer.Ingress)
		addrs = append(addrs, s.Spec.ExternalIPs...)
		if len(addrs) == 0 {
			return "<pending>"
		}
		return strings.Join(addrs, ",")
	case corev1.ServiceTypeExternalName:
		return s.Spec.ExternalName
	}
	return "<unknown>"
}

// loadBalancerAddresses are the distinct IPs (else hostnames) of a load balancer, sorted. kubectl
// shows them unabridged with -o wide, which is how kube-apiserver renders them.
func loadBalancerAddresses(ingress []corev1.LoadBalancerIngress) []string {
	return addresses(ingress, func(in corev1.LoadBalancerIngress) (string, string) { return in.IP, in.Hostname })
}

// addresses are the distinct IPs (else hostnames) of load-balancer ingress points, sorted: a
// Service's and an Ingress's status have the same shape in two types.
func addresses[T any](ingress []T, ipHost func(T) (ip, host string)) []string {
	var addrs []string
	for _, in := range ingress {
		if ip, host := ipHost(in); ip != "" {
			addrs = append(addrs, ip)
		} else if host != "" {
			addrs = append(addrs, host)
		}
	}
	slices.Sort(addrs)
	return slices.Compact(addrs)
}

func servicePorts(ports []corev1.ServicePort) string {
	s := make([]string, len(ports))
	for i, p := range ports {
		if p.NodePort > 0 {
			s[i] = fmt.Sprintf("%d:%d/%s", p.Port, p.NodePort, p.Protocol)
		} else {
			s[i] = fmt.Sprintf("%d/%s", p.Port, p.Protocol)
		}
	}
	return strings.Join(s, ",")
}

func ingresses() *Printer {
	type T = networkingv1.Ingress
	return kind[T]{columns: []column[T]{
		{nameColumn(), func(o *T, _ time.Time) any { return o.Name }},
		{str("Class", "The name of the IngressClass resource that should be used for additional configuration"),
			func(o *T, _ time.Time) any { return ptr.Deref(o.Spec.IngressClassName, "<none>") }},
		{str("Hosts", "Hosts that incoming requests are matched against before the ingress rule"),
			func(o *T, _ time.Time) any { return ingressHosts(o.Spec.Rules) }},
		{str("Address", "Address is a list containing ingress points for the load-balancer"),
			func(o *T, _ time.Time) any { return ingressAddress(o.Status.LoadBalancer.Ingress) }},
		{str("Ports", "Ports of TLS configurations that open"), func(o *T, _ time.Time) any {
			if len(o.Spec.TLS) > 0 {
				return "80, 443"
			}
			return "80"
		}},
		{ageColumn(), func(o *T, now time.Time) any { return since(o.CreationTimestamp, now) }},
	}}.printer()
}

// ingressHosts lists the first three hosts the rules name ("*" if none does); if rules follow the
// third, it adds how many rules there are beyond three (as kubectl always has, hostless ones included).
func ingressHosts(rules []networkingv1.IngressRule) string {
	const max = 3
	var hosts []string
	more := false
	for _, r := range rules {
		if len(hosts) == max {
			more = true
			break
		}
		if r.Host != "" {
			hosts = append(hosts, r.Host)
		}
	}
	if len(hosts) == 0 {
		return "*"
	}
	if more {
		return fmt.Sprintf("%s + %d more...", strings.Join(hosts, ","), len(rules)-max)
	}
	return strings.Join(hosts, ",")
}

func ingressAddress(ingress []networkingv1.IngressLoadBalancerIngress) string {
	return strings.Join(addresses(ingress, func(in networkingv1.IngressLoadBalancerIngress) (string, string) { return in.IP, in.Hostname }), ",")
}
