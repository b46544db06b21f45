# NixOS module for Total Recall: services.agentos.memory.*
#
#   imports = [ ./deploy/nixos/module.nix ];
#   services.agentos.memory = {
#     enable = true;
#     package = pkgs.callPackage ./totalrecall.nix {};   # a Python env with the workspace packages
#     embedding.device = "cuda";
#     recall.weights = { vector = 0.55; bm25 = 0.30; recency = 0.15; };
#   };
{ config, lib, pkgs, ... }:

let
  cfg = config.services.agentos.memory;
  inherit (lib) mkEnableOption mkOption mkIf types optionalAttrs;

  python = "${cfg.package}/bin/python";

  commonEnv = {
    TOTALRECALL_HOME = cfg.stateDir;
  };

  natsUrl = "nats://127.0.0.1:${toString cfg.nats.port}";
  pgDsn = "postgresql:///totalrecall?host=/run/postgresql";

  serviceEnv = {
    embedder = {
      TR_EMBEDDER_NATS_URL = natsUrl;
      TR_EMBEDDER_MODEL_PATH = cfg.embedding.model;
      TR_EMBEDDER_DEVICE = cfg.embedding.device;
      TR_EMBEDDER_N_THREADS = toString cfg.embedding.threads;
    };
    indexer = {
      TR_INDEXER_NATS_URL = natsUrl;
      TR_INDEXER_PG_DSN = pgDsn;
      TR_INDEXER_HOT_MAX_AGE_S = toString (cfg.tiers.hotHours * 3600);
      TR_INDEXER_WARM_MAX_AGE_S = toString (cfg.tiers.warmDays * 86400);
    };
    recall-api = {
      TR_RECALL_NATS_URL = natsUrl;
      TR_RECALL_PG_DSN = pgDsn;
      TR_RECALL_HTTP_HOST = cfg.recall.host;
      TR_RECALL_HTTP_PORT = toString cfg.recall.port;
      TR_RECALL_WEIGHT_VECTOR = toString cfg.recall.weights.vector;
      TR_RECALL_WEIGHT_BM25 = toString cfg.recall.weights.bm25;
      TR_RECALL_WEIGHT_RECENCY = toString cfg.recall.weights.recency;
      TR_RECALL_HALF_LIFE_HOURS = toString cfg.recall.halfLifeHours;
      TR_RECALL_MMR_LAMBDA = toString cfg.recall.mmrLambda;
    };
    watchers = {
      TR_WATCHERS_NATS_URL = natsUrl;
      TR_WATCHERS_PROCESS__ENABLED = lib.boolToString cfg.watchers.process.enable;
      TR_WATCHERS_PROCESS__INTERVAL_S = toString cfg.watchers.process.interval;
      TR_WATCHERS_JOURNAL__ENABLED = lib.boolToString cfg.watchers.journal.enable;
      TR_WATCHERS_SERVICES__ENABLED = lib.boolToString cfg.watchers.services.enable;
      TR_WATCHERS_SERVICES__INTERVAL_S = toString cfg.watchers.services.interval;
      TR_WATCHERS_FILESYSTEM__ENABLED = lib.boolToString cfg.watchers.filesystem.enable;
      TR_WATCHERS_FILESYSTEM__PATHS = builtins.toJSON cfg.watchers.filesystem.paths;
      TR_WATCHERS_NIXOS__ENABLED = lib.boolToString cfg.watchers.nixos.enable;
    };
  };

  mkService = name: module: extra: {
    description = "Total Recall ${name}";
    wantedBy = [ "multi-user.target" ];
    after = [ "network-online.target" "totalrecall-nats.service" "postgresql.service" ];
    wants = [ "network-online.target" ];
    environment = commonEnv // serviceEnv.${name};
    serviceConfig = {
      ExecStart = "${python} -m ${module}";
      User = "totalrecall";
      Group = "totalrecall";
      Restart = "on-failure";
      RestartSec = 2;
      StateDirectory = "totalrecall";
      NoNewPrivileges = true;
      PrivateTmp = true;
      ProtectSystem = "strict";
      ProtectHome = true;
      ReadWritePaths = [ cfg.stateDir ];
      CapabilityBoundingSet = "";
      EnvironmentFile = lib.optional (cfg.environmentFile != null) cfg.environmentFile;
    } // extra;
  };
in
{
  options.services.agentos.memory = {
    enable = mkEnableOption "Total Recall, the memory system of the OS agent";

    package = mkOption {
      type = types.package;
      description = "A Python environment containing the Total Recall workspace packages.";
    };

    stateDir = mkOption {
      type = types.path;
      default = "/var/lib/totalrecall";
      description = "Zvec tiers, Markdown ground truth, spool and caches.";
    };

    environmentFile = mkOption {
      type = types.nullOr types.path;
      default = null;
      description = "Secrets such as TR_RECALL_API_TOKEN (never put them in the Nix store).";
    };

    nats.port = mkOption { type = types.port; default = 4222; };

    embedding = {
      model = mkOption {
        type = types.str;
        default = "${cfg.stateDir}/models/all-MiniLM-L6-v2.f16.gguf";
        description = "Path to a GGUF embedding model (built by `totalrecall model build`).";
      };
      device = mkOption {
        type = types.enum [ "auto" "cpu" "cuda" ];
        default = "auto";
      };
      threads = mkOption { type = types.ints.positive; default = 1; };
    };

    tiers = {
      hotHours = mkOption { type = types.ints.positive; default = 24; };
      warmDays = mkOption { type = types.ints.positive; default = 90; };
    };

    recall = {
      host = mkOption { type = types.str; default = "127.0.0.1"; };
      port = mkOption { type = types.port; default = 8765; };
      weights = {
        vector = mkOption { type = types.float; default = 0.55; };
        bm25 = mkOption { type = types.float; default = 0.30; };
        recency = mkOption { type = types.float; default = 0.15; };
      };
      halfLifeHours = mkOption { type = types.float; default = 168.0; };
      mmrLambda = mkOption { type = types.float; default = 0.7; };
    };

    watchers = {
      process = {
        enable = mkOption { type = types.bool; default = true; };
        interval = mkOption { type = types.ints.positive; default = 30; };
      };
      journal.enable = mkOption { type = types.bool; default = true; };
      services = {
        enable = mkOption { type = types.bool; default = true; };
        interval = mkOption { type = types.ints.positive; default = 60; };
      };
      filesystem = {
        enable = mkOption { type = types.bool; default = true; };
        paths = mkOption {
          type = types.listOf types.str;
          default = [ "/etc/nixos" ];
        };
      };
      nixos.enable = mkOption { type = types.bool; default = true; };
    };
  };

  config = mkIf cfg.enable {
    users.users.totalrecall = {
      isSystemUser = true;
      group = "totalrecall";
      extraGroups = [ "systemd-journal" ];
      home = cfg.stateDir;
    };
    users.groups.totalrecall = { };

    services.postgresql = {
      enable = true;
      ensureDatabases = [ "totalrecall" ];
      ensureUsers = [ { name = "totalrecall"; ensureDBOwnership = true; } ];
    };

    systemd.services = {
      totalrecall-nats = {
        description = "NATS with JetStream for Total Recall";
        wantedBy = [ "multi-user.target" ];
        serviceConfig = {
          ExecStart = "${cfg.package}/bin/nats-server -js -sd ${cfg.stateDir}/nats -a 127.0.0.1 -p ${toString cfg.nats.port}";
          User = "totalrecall";
          StateDirectory = "totalrecall";
          Restart = "on-failure";
        };
      };
      totalrecall-indexer = mkService "indexer" "totalrecall_indexer" { };
      totalrecall-embedder = mkService "embedder" "totalrecall_embedder" {
        # The GPU device nodes must stay visible to the embedder.
        PrivateDevices = false;
      };
      totalrecall-recall-api = mkService "recall-api" "totalrecall_recall_api" { };
      totalrecall-watchers = mkService "watchers" "totalrecall_watchers" {
        ProtectHome = "read-only";
        ReadOnlyPaths = cfg.watchers.filesystem.paths;
      };
    };
  };
}
