"""`estimator.training_job_analytics`: a SageMaker job's metric values from CloudWatch, as the SDK v2 reads them.

SageMaker applies the job's MetricDefinitions to its logs and publishes each value to CloudWatch Metrics in the
`/aws/sagemaker/TrainingJobs` namespace, dimension `TrainingJobName`. This is v2's `TrainingJobAnalytics`
(aws/sagemaker-python-sdk v2.257.7, src/sagemaker/analytics.py), on the drop-in's boto3 session: the metric names
from DescribeTrainingJob's AlgorithmSpecification.MetricDefinitions unless given; the interval from
TrainingStartTime to TrainingEndTime (now while it runs) plus one minute, as v2 widens it (CloudWatch drops the
seconds of EndTime); GetMetricStatistics with the Average over `period` seconds (60) per metric; and a DataFrame of
`timestamp` (seconds since the metric's first point), `metric_name` and `value`, each metric's points in time
order, metrics in the order asked. pandas is needed for the frame, as in v2.
"""

from __future__ import annotations

import datetime
import logging
from collections import defaultdict
from typing import Any

from cloudddp.errors import CloudDDPError
from cloudddp.sagemaker.session import Session

logger = logging.getLogger(__name__)

METRICS_PERIOD_DEFAULT = 60  # seconds, as v2's


class NotAssociated(CloudDDPError, ValueError):
    """No training job yet: a ValueError, as v2 raises."""


class TrainingJobAnalytics:
    """v2's `sagemaker.analytics.TrainingJobAnalytics` (see the module docstring)."""

    CLOUDWATCH_NAMESPACE = "/aws/sagemaker/TrainingJobs"

    def __init__(
        self,
        training_job_name: str,
        metric_names: list[str] | None = None,
        sagemaker_session: Any = None,
        start_time: datetime.datetime | None = None,
        end_time: datetime.datetime | None = None,
        period: int | None = None,
    ) -> None:
        sagemaker_session = sagemaker_session or Session()  # as v2: the default AWS configuration chain
        boto, region = sagemaker_session.boto_session, sagemaker_session.boto_region_name
        self._sage_client = boto.client("sagemaker", region_name=region)
        self._cloudwatch = boto.client("cloudwatch", region_name=region)
        self._training_job_name = training_job_name
        self._start_time, self._end_time = start_time, end_time
        self._period = period or METRICS_PERIOD_DEFAULT
        self._metric_names = metric_names or self._metric_names_for_training_job()
        self._dataframe: Any = None
        self.clear_cache()

    @property
    def name(self) -> str:
        return self._training_job_name

    def __repr__(self) -> str:
        return f"<sagemaker.TrainingJobAnalytics for {self.name}>"

    def clear_cache(self) -> None:
        """Forget what was fetched: the next `dataframe()` asks CloudWatch again (and the job's times)."""
        self._dataframe = None
        self._data: dict[str, list[Any]] = defaultdict(list)
        self._time_interval = self._determine_timeinterval()

    def dataframe(self, force_refresh: bool = False) -> Any:
        if force_refresh:
            self.clear_cache()
        if self._dataframe is None:
            self._dataframe = self._fetch_dataframe()
        return self._dataframe

    def export_csv(self, filename: str) -> None:
        self.dataframe().to_csv(filename)

    def _determine_timeinterval(self) -> dict[str, datetime.datetime]:
        description = self._sage_client.describe_training_job(TrainingJobName=self.name)
        start_time = self._start_time or description["TrainingStartTime"]
        ended = description.get("TrainingEndTime", datetime.datetime.now(datetime.timezone.utc))
        end_time = self._end_time or ended + datetime.timedelta(minutes=1)
        return {"start_time": start_time, "end_time": end_time}

    def _fetch_dataframe(self) -> Any:
        try:
            import pandas
        except ImportError:
            raise CloudDDPError(
                "training_job_analytics.dataframe() returns a pandas DataFrame, and pandas is not installed: "
                "pip install pandas (or 'cloudddp[plot]')."
            ) from None
        for metric_name in self._metric_names:
            self._fetch_metric(metric_name)
        return pandas.DataFrame(self._data)

    def _fetch_metric(self, metric_name: str) -> None:
        request = {
            "Namespace": self.CLOUDWATCH_NAMESPACE,
            "MetricName": metric_name,
            "Dimensions": [{"Name": "TrainingJobName", "Value": self.name}],
            "StartTime": self._time_interval["start_time"],
            "EndTime": self._time_interval["end_time"],
            "Period": self._period,
            "Statistics": ["Average"],
        }
        points = self._cloudwatch.get_metric_statistics(**request)["Datapoints"]
        if not points:
            logger.warning("Warning: No metrics called %s found", metric_name)
            return
        base_time = min(point["Timestamp"] for point in points)
        timed = [((point["Timestamp"] - base_time).total_seconds(), point["Average"]) for point in points]
        timed.sort(key=lambda xy: xy[0])  # by time only, as v2 sorts
        for elapsed_seconds, value in timed:
            self._data["timestamp"].append(elapsed_seconds)
            self._data["metric_name"].append(metric_name)
            self._data["value"].append(value)

    def _metric_names_for_training_job(self) -> list[str]:
        description = self._sage_client.describe_training_job(TrainingJobName=self._training_job_name)
        return [definition["Name"] for definition in description["AlgorithmSpecification"]["MetricDefinitions"]]
