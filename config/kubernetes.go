package config

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	promconfig "github.com/prometheus/common/config"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
)

// KubernetesSDConfig is a subset of Prometheus' kubernetes_sd_config: the
// ready endpoints of Services, read from their EndpointSlices through the
// Kubernetes API (a watch, so changes arrive within a second):
//
//	kubernetes_sd_configs:
//	  - role: endpointslice        # the only role
//	    namespaces: {names: [llm]} # default: the prober's own namespace
//	    service: vllm              # and/or label_selector: app=vllm
//	    port: http                 # the endpoint port's name or number
//
// Each ready endpoint address with the chosen port is one target.
type KubernetesSDConfig struct {
	// Role is what is discovered; only "endpointslice" is supported.
	Role string `yaml:"role"`
	// KubeconfigFile is a kubeconfig to reach the API server with; empty,
	// the in-cluster configuration (the pod's service account).
	KubeconfigFile string `yaml:"kubeconfig_file,omitempty"`
	// Namespaces are watched; none named, the prober's own namespace
	// (from its service account) in-cluster, every namespace outside.
	Namespaces KubernetesNamespaces `yaml:"namespaces,omitempty"`
	// Service keeps the endpoints of the Service of this name.
	Service string `yaml:"service,omitempty"`
	// LabelSelector keeps the endpoints of Services whose labels match it
	// (the EndpointSlice controller copies a Service's labels onto its
	// EndpointSlices, which is what is matched).
	LabelSelector string `yaml:"label_selector,omitempty"`
	// Port is the name or number of the endpoint port that becomes the
	// target's port.
	Port string `yaml:"port"`
	// Scheme is http or https for the module's HTTP protocols; http when
	// empty.
	Scheme string `yaml:"scheme,omitempty"`
}

// KubernetesNamespaces chooses the namespaces a kubernetes_sd_config
// watches.
type KubernetesNamespaces struct {
	Names []string `yaml:"names,omitempty"`
}

// KubernetesRoleEndpointSlice is the one supported role.
const KubernetesRoleEndpointSlice = "endpointslice"

// maxKubernetesNamespaces bounds the watches one source opens.
const maxKubernetesNamespaces = 64

// PortNumber is Port as a number, and whether it is one.
func (k *KubernetesSDConfig) PortNumber() (int32, bool) {
	n, err := strconv.ParseInt(k.Port, 10, 32)
	return int32(n), err == nil
}

// Selector is the label selector of the EndpointSlices to read: the
// Service's name (EndpointSlices carry it as kubernetes.io/service-name)
// and label_selector. Both were checked at load.
func (k *KubernetesSDConfig) Selector() labels.Selector {
	sel, err := labels.Parse(k.LabelSelector)
	if err != nil {
		return labels.Nothing()
	}
	if k.Service != "" {
		req, err := labels.NewRequirement("kubernetes.io/service-name", "=", []string{k.Service})
		if err != nil {
			return labels.Nothing()
		}
		sel = sel.Add(*req)
	}
	return sel
}

func validateKubernetesSD(d *decoder, path string, k *KubernetesSDConfig) {
	if k == nil {
		d.at(path, "empty kubernetes_sd_config")
		return
	}
	switch k.Role {
	case KubernetesRoleEndpointSlice:
	case "":
		d.at(path+".role", "missing role; set role: endpointslice")
	default:
		d.at(path+".role", "unsupported role %q; only endpointslice is supported (every ready endpoint of the chosen Services)", k.Role)
	}
	for i, ns := range k.Namespaces.Names {
		np := fmt.Sprintf("%s.namespaces.names[%d]", path, i)
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			d.at(np, "invalid namespace %q: %s", ns, strings.Join(errs, "; "))
		} else if slices.Index(k.Namespaces.Names, ns) < i {
			d.at(np, "namespace %q is listed twice", ns)
		}
	}
	if len(k.Namespaces.Names) > maxKubernetesNamespaces {
		d.at(path+".namespaces.names", "at most %d namespaces per kubernetes_sd_config, got %d", maxKubernetesNamespaces, len(k.Namespaces.Names))
	}
	if k.Service == "" && k.LabelSelector == "" {
		d.at(path, "no Services chosen; set service: (a Service's name) or label_selector: (the Services' labels), or both")
	}
	if k.Service != "" {
		if errs := validation.IsDNS1035Label(k.Service); len(errs) > 0 {
			d.at(path+".service", "invalid Service name %q: %s", k.Service, strings.Join(errs, "; "))
		}
	}
	if k.LabelSelector != "" {
		if _, err := labels.Parse(k.LabelSelector); err != nil {
			d.at(path+".label_selector", "invalid label selector: %v", err)
		}
	}
	switch n, isNum := k.PortNumber(); {
	case k.Port == "":
		d.at(path+".port", "missing port; set the name (e.g. http) or number of the endpoint port to probe")
	case isNum:
		if n < 1 || n > 65535 {
			d.at(path+".port", "port number %d is not between 1 and 65535", n)
		}
	default:
		if errs := validation.IsValidPortName(k.Port); len(errs) > 0 {
			d.at(path+".port", "invalid port name %q: %s", k.Port, strings.Join(errs, "; "))
		}
	}
	if k.Scheme != "" && k.Scheme != "http" && k.Scheme != "https" {
		d.at(path+".scheme", "scheme %q is neither http nor https", k.Scheme)
	}
}

// resolveKubernetesSD makes kubeconfig_file absolute and checks, at load,
// that it can be read.
func resolveKubernetesSD(d *decoder, path, dir string, k *KubernetesSDConfig) {
	if k.KubeconfigFile == "" {
		return
	}
	k.KubeconfigFile = promconfig.JoinDir(dir, k.KubeconfigFile)
	if _, err := os.Stat(k.KubeconfigFile); err != nil {
		d.at(path+".kubeconfig_file", "cannot read kubeconfig_file: %v", err)
	}
}
